"use strict";

// The conversation page: the transcript the server's tab holds (history,
// then live events), the controls, and the dialogs. Every string from the
// server arrives already made inert (control, bidi and invisible
// characters shown as notation) and is inserted with textContent only.
(function () {
  const id = document.querySelector('meta[name="conversation"]').content;
  const $ = (x) => document.getElementById(x);
  const list = $("transcript"), records = $("records"), notice = $("notice"), text = $("text");
  let es = null, tab = "", view = null, items = [], shownFrom = 0, stops = new Map(), prevEngine = "";
  let approvals = [], approvalsByKey = new Map(), notified = new Set();
  let queue = null, editing = null, dismissed = new Set(), queueKey = "";

  function say(msg, cls) {
    notice.textContent = msg;
    notice.className = "notice " + (cls || "");
  }

  // ---- transcript ----
  // roleClass is the class an item's role gives it: the role's first word,
  // and only a plain word. A role is the engine's string (a custom
  // message's is "custom " and the type the engine chose), shown as text
  // in the header; as class names it could mark a finished item open or
  // dress it as a marker or an approval.
  function roleClass(role) {
    const w = (role || "").split(" ")[0];
    return /^[A-Za-z]+$/.test(w) ? " role-" + w : "";
  }

  function itemNode(it) {
    const li = mosaic.el("li", "item " + it.kind + roleClass(it.role) + (it.open ? " open" : ""));
    const head = it.lines.length ? it.lines[0] : "";
    const body = it.lines.slice(1).join("\n");
    const fold = it.kind === "tool" || it.role === "toolResult";
    if (fold) {
      const d = mosaic.el("details");
      d.appendChild(mosaic.el("summary", "head", head));
      d.appendChild(mosaic.el("pre", "body", body));
      li.appendChild(d);
    } else if (it.kind === "message") {
      li.appendChild(mosaic.el("div", "head", head));
      if (body) li.appendChild(mosaic.el("pre", "body", body));
    } else {
      li.appendChild(mosaic.el("div", "line", it.kind === "marker" ? "reconcile: " + it.lines.join(" ").replace(/^== reconcile: | ==$/g, "") : head));
    }
    return li;
  }

  // patch applies the items that changed. The stream holds a window of
  // the newest items (from: the first it holds; an engine's output is
  // endless, and a tab's DOM must not grow with it): the page lets go of
  // those before it and says how many, and takes them again when the
  // window moves back (older history read back on request).
  function patch(p) {
    const atBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 40;
    const from = p.from || 0;
    for (let i = shownFrom; i < Math.min(from, items.length); i++) {
      if (items[i]) list.removeChild(items[i]);
      items[i] = undefined;
    }
    shownFrom = from;
    for (const [k, it] of Object.entries(p.set)) {
      const i = Number(k);
      if (i < from) continue;
      const n = itemNode(it);
      // Keep a folded item open if the person opened it.
      const old = items[i];
      if (old) {
        const od = old.querySelector("details"), nd = n.querySelector("details");
        if (od && nd && od.open) nd.open = true;
        list.replaceChild(n, old);
      } else {
        list.insertBefore(n, nextShown(i));
      }
      items[i] = n;
    }
    while (items.length > p.n) {
      const n = items.pop();
      if (n) list.removeChild(n);
    }
    showWindow(from);
    if (atBottom) window.scrollTo(0, document.body.scrollHeight);
  }

  // nextShown is the node of the first item after i the page shows.
  function nextShown(i) {
    for (let j = i + 1; j < items.length; j++) if (items[j]) return items[j];
    return null;
  }

  function showWindow(from) {
    $("older").hidden = !(view && view.more) && !from;
    let m = list.querySelector(":scope > li.window");
    if (!from) { if (m) m.remove(); return; }
    if (!m) m = mosaic.el("li", "window");
    if (list.firstChild !== m) list.prepend(m);
    m.textContent = "— " + from + " earlier items are not shown in this tab (it holds the newest); Load older history shows them, `mosaicctl attach " + id + "` pages through all";
  }

  function reset() {
    list.replaceChildren();
    items = [];
    shownFrom = 0;
    approvalsByKey = new Map();
    // A new tab is a new connection: its queue record starts a new
    // revision order (an edit in progress is kept and finds its item
    // again, or shows that it left the queue).
    queue = null;
  }

  // ---- state ----
  function setState(s) {
    if (s.tab !== tab) {
      // The server no longer knew this page's tab (it restarted, or the
      // place was kept longer than it keeps places): the page is read again.
      if (tab) reconciled("this page was read again: the server no longer held its place (restarted, or away for more than 10 minutes)");
      reset();
      tab = s.tab;
    }
    const was = view;
    view = s;
    const ctl = s.mode === "controller";
    $("mode").textContent = ctl ? "controller" : (s.controller ? "observer" : "observer · no controller");
    $("mode").className = "pill " + (ctl ? "ok" : "");
    $("engine").textContent = "engine " + (s.engineState || "-");
    $("engine").className = "pill engine " + (s.engineState || "");
    $("gen").textContent = "gen " + s.generation;
    const st = $("status");
    st.replaceChildren();
    const add = (t, cls) => st.appendChild(mosaic.el("span", cls || "", t));
    add("binding " + (s.state || "-"));
    add("admission " + (s.admission || "-") + (s.admissionReason ? " (" + s.admissionReason + ")" : ""));
    add("execution " + (s.execution || "-"));
    if (s.lastStop) add("last stop " + s.lastStop);
    if (s.pendingApprovals > 0) add("waiting for approval (" + s.pendingApprovals + ")", "warn");
    if (s.controller && !s.controllerConnected) add("the controller's connection is gone", "warn");
    if (s.engineEnd) add("engine ended: " + (s.engineEnd.status || "") + " " + (s.engineEnd.stderr || []).join(" | "), "warn");
    if (s.dead) add("connection ended: " + s.dead, "bad");
    $("older").hidden = !s.more && !shownFrom;
    $("older").disabled = s.loading;
    $("older").textContent = s.loading ? "Loading older history…" : "Load older history";
    text.placeholder = ctl ? "Prompt the engine" : "Observer: take control to send (your text is kept)";
    document.title = "[" + (s.pendingApprovals > 0 ? "waiting for approval" : (s.engineState || "-")) + (ctl ? "" : " · observing") + "] " + id + " · mosaic";
    if (was && was.engineState === "busy" && s.engineState === "idle") notify("turn ended", id);
    if (was && was.mode === "controller" && !ctl) {
      // Control left this tab's connection (another client took it), or
      // the tab is on a new connection, which observes (the server closed
      // the old one while the page was away, or the controller closed it
      // or restarted; s.closed says which): only the first is a takeover.
      if (s.connection === was.connection) say("another client took control: this tab is an observer now (your text is kept)", "warn");
      else say("this tab's connection was closed" + (s.closed ? " (" + s.closed + ")" : "") + ": it observes on a new connection and holds no control; take control to act (your text is kept)", "warn");
    }
    prevEngine = s.engineState;
    renderApprovals();
    renderQueue();
  }

  // ---- approvals: native decisions, answered only by the controller ----
  // Each view arrives made inert by the server (title, message and every
  // label); a button names its choice by index and the server sends the
  // exact label it holds, so the engine's bytes never pass through here.
  function isOpen(a) {
    return !a.unseen && (a.state === "pending" || a.state === "disabled" || a.state === "uncertain");
  }

  function canAnswer(a) {
    return !!view && view.mode === "controller" && a.state === "pending" && !a.unseen && a.generation === view.generation;
  }

  function approvalNode(a) {
    const box = mosaic.el("div", "approval state-" + a.state + (a.unseen ? " unseen" : ""));
    box.dataset.approval = a.id;
    box.dataset.state = a.unseen ? "unseen" : a.state;
    box.appendChild(mosaic.el("div", "approval-head", "approval: native " + a.form + " · " + (a.unseen ? "settled while this page was away" : a.state)));
    box.appendChild(mosaic.el("pre", "approval-title", a.title));
    if (a.message) box.appendChild(mosaic.el("pre", "approval-message", a.message));
    if (isOpen(a) && a.choices.length) {
      const bs = mosaic.el("div", "buttons choices");
      a.choices.forEach((label, i) => {
        const b = mosaic.el("button", "choice", label);
        b.type = "button";
        b.dataset.index = String(i);
        b.disabled = !canAnswer(a);
        b.addEventListener("click", () => answer(a, i, box));
        bs.appendChild(b);
      });
      box.appendChild(bs);
    }
    let who;
    if (a.state === "resolved" && a.resolvedBy) {
      who = "answered " + JSON.stringify(a.chosen) + " by connection " + a.resolvedBy.connection + (view && a.resolvedBy.connection === view.connection ? " (this tab)" : "") +
        " · request " + a.resolvedBy.request + " · generation " + a.resolvedBy.generation;
    } else if (a.state === "pending" && !a.unseen) {
      const mine = view && a.controller === view.connection;
      who = mine ? (canAnswer(a) ? "this tab is the controller: it may answer" : "this tab's view is stale: wait for the current projection")
        : "read-only: only the controller (" + (a.controller || "none") + ") may answer; take control to answer";
    } else {
      who = a.unseen ? "no longer open when this page observed again; the outcome is in the audit log" : "nobody can answer it";
    }
    box.appendChild(mosaic.el("div", "approval-who", who));
    const meta = ["decision " + a.decision, "projection " + a.id, "generation " + a.generation];
    if (a.deadline) meta.push("deadline " + a.deadline);
    if (a.cancelled) meta.push("the controller cancelled the native dialog");
    if (a.evidence) meta.push("evidence " + a.evidence);
    box.appendChild(mosaic.el("div", "meta", meta.join(" · ")));
    if (a.reason) box.appendChild(mosaic.el("div", "approval-reason", a.reason));
    return box;
  }

  function renderApprovals() {
    const open = $("approvals"), done = $("approvals-done");
    open.replaceChildren();
    done.replaceChildren();
    for (const a of approvals) (isOpen(a) ? open : done).appendChild(approvalNode(a));
    open.hidden = !open.children.length;
  }

  // applyApprovals takes a change of the decisions the tab holds: their
  // order (the server's keys) and those that changed since this stream
  // last sent them; a key the order no longer names has gone.
  function applyApprovals(c) {
    for (const [k, v] of Object.entries(c.set || {})) approvalsByKey.set(k, v);
    const next = new Map();
    for (const k of c.order || []) if (approvalsByKey.has(k)) next.set(k, approvalsByKey.get(k));
    approvalsByKey = next;
    setApprovals(Array.from(next.values()));
  }

  function setApprovals(list) {
    approvals = list;
    for (const a of list) {
      const k = a.decision + "/" + a.state;
      if (a.state === "pending" && !a.unseen && !notified.has(k)) {
        notified.add(k);
        notify("waiting for an approval", a.title);
      }
    }
    forgetNotified(list);
    renderApprovals();
  }

  // forgetNotified keeps only the notified keys of the decisions the tab
  // still holds: the engine opens as many dialogs as it likes (a confirm
  // with a 1 ms timeout in a loop, each a new decision), and a key kept
  // for every one would grow the page for as long as it stays open.
  function forgetNotified(list) {
    const held = new Set(list.map((a) => a.decision + "/" + a.state));
    for (const k of notified) if (!held.has(k)) notified.delete(k);
  }

  // answer posts the choice with the view it was decided on; the
  // outcome (the resolution, or the controller's refusal) stays shown
  // under the panel, since the panel is redrawn as records arrive.
  async function answer(a, i, box) {
    for (const b of box.querySelectorAll("button.choice")) b.disabled = true;
    const out = $("approvals-result");
    const j = await send("approval", { approval: a.id, choice: i });
    if (j && j.reply) {
      out.textContent = "approval " + a.id + " answered " + JSON.stringify(j.reply.chosen);
      out.className = "approval-result ok";
      say(out.textContent, "ok");
    } else if (j && j.refusal) {
      out.textContent = "approval " + a.id + " refused " + j.refusal.code + ": " + j.refusal.message;
      out.className = "approval-result bad";
    }
    renderApprovals();
  }

  // ---- the prompt queue: chips under the composer ----
  // Each item's text arrives made inert by the server (text) and is shown
  // with textContent; exact (the person's own bytes, when they differ
  // from the notation) is only ever a textarea's value. Edit and Cancel
  // name the item's revision as the chip showed it (compare-and-set at
  // the controller: stale-item when it moved on), and every command
  // carries the page's generation, so an observer or a stale view is
  // refused by the controller.
  function canQueue() {
    return !!view && view.mode === "controller" && !view.dead;
  }

  function exactOf(it) {
    return it.exact !== undefined ? it.exact : it.text;
  }

  function button(label, cls, enabled, f) {
    const b = mosaic.el("button", cls, label);
    b.type = "button";
    b.disabled = !enabled;
    b.addEventListener("click", f);
    return b;
  }

  function queueOut(msg, cls) {
    const o = $("queue-result");
    o.textContent = msg;
    o.className = "queue-result " + (cls || "");
  }

  async function queueOp(op, extra, what) {
    const j = await send(op, extra);
    if (j && j.reply) queueOut(what + " (queue revision " + j.reply.revision + ")", "ok");
    else if (j && j.refusal) queueOut(what + " refused " + j.refusal.code + ": " + j.refusal.message, "bad");
    else if (j) queueOut(what + ": " + (j.unknown ? "outcome unknown: " + j.unknown : j.error || "no answer"), "bad");
    return j;
  }

  function setQueue(q) {
    if (queue && q.revision <= queue.revision) return; // never an older queue over a newer one
    queue = q;
    renderQueue();
  }

  // putBack puts a text into the composer and never sends it; a composer
  // holding other text is left alone.
  function putBack(t, what) {
    if (text.value.trim() !== "") {
      say("the composer holds other text: send or clear it first (nothing was replaced)", "warn");
      return false;
    }
    text.value = t;
    text.focus();
    say(what + " is in the composer: edit it and send it when you want (nothing was sent)", "ok");
    return true;
  }

  function editedText(ed) {
    return ed.ta ? ed.ta.value : ed.text;
  }

  function editor(ed) {
    if (!ed.ta) {
      ed.ta = mosaic.el("textarea", "chip-editor");
      ed.ta.rows = 2;
      ed.ta.value = ed.text;
      ed.ta.setAttribute("aria-label", "edit queued item " + ed.id);
    }
    return ed.ta;
  }

  function chipNode(it) {
    const box = mosaic.el("div", "chip state-" + it.state);
    box.dataset.item = it.id;
    box.dataset.revision = String(it.revision);
    box.dataset.state = it.state;
    box.appendChild(mosaic.el("span", "chip-state", it.state + " · r" + it.revision + (it.edits ? " · edited" : "")));
    const ok = canQueue() && it.state === "queued";
    if (editing && editing.id === it.id) {
      box.appendChild(editor(editing));
      box.appendChild(button("Save", "chip-save", ok, async () => {
        const ed = editing;
        const j = await queueOp("edit-queued", { item: ed.id, revision: ed.revision, text: editedText(ed) }, "edit of " + ed.id);
        if (j && j.reply && editing === ed) { editing = null; queueKey = ""; renderQueue(); }
      }));
      box.appendChild(button("Discard edit", "chip-discard", true, () => { editing = null; queueKey = ""; renderQueue(); }));
      return box;
    }
    box.appendChild(mosaic.el("span", "chip-text", it.text));
    box.appendChild(button("Edit", "chip-edit", ok, () => {
      editing = { id: it.id, revision: it.revision, text: exactOf(it) };
      queueKey = "";
      renderQueue();
      if (editing.ta) editing.ta.focus();
    }));
    box.appendChild(button("Cancel", "chip-cancel", ok, () => queueOp("cancel-queued", { item: it.id, revision: it.revision }, "cancel of " + it.id)));
    return box;
  }

  // orphanNode keeps an edit whose item left the queue (sent, cancelled
  // elsewhere, turned into a draft) before it was saved: the text is the
  // person's and is not thrown away.
  function orphanNode(ed) {
    const box = mosaic.el("div", "chip orphan");
    box.dataset.item = ed.id;
    box.appendChild(mosaic.el("span", "chip-state", "item " + ed.id + " left the queue before this edit was saved"));
    box.appendChild(editor(ed));
    box.appendChild(button("Put back in the composer", "chip-put-back", true, () => {
      if (putBack(editedText(ed), "your edit")) { editing = null; queueKey = ""; renderQueue(); }
    }));
    box.appendChild(button("Discard edit", "chip-discard", true, () => { editing = null; queueKey = ""; renderQueue(); }));
    return box;
  }

  function draftNode(it) {
    const box = mosaic.el("div", "draft");
    box.dataset.item = it.id;
    box.appendChild(mosaic.el("span", "chip-state", "recovered draft " + it.id + " · " + (it.reason || "a force stop took it out of the queue; it is never resent by itself")));
    box.appendChild(mosaic.el("span", "chip-text", it.text));
    box.appendChild(button("Put back in the composer", "draft-put-back", true, () => {
      if (putBack(exactOf(it), "draft " + it.id)) { dismissed.add(it.id); queueKey = ""; renderQueue(); }
    }));
    box.appendChild(button("Dismiss", "draft-dismiss", true, () => { dismissed.add(it.id); queueKey = ""; renderQueue(); }));
    return box;
  }

  // renderQueue redraws the chips when what they show changed (a queue
  // revision, control, the edit), keeping an edit's textarea and focus.
  function renderQueue() {
    const key = JSON.stringify([queue && queue.revision, tab, canQueue(), editing && editing.id, dismissed.size]);
    if (key === queueKey) return;
    queueKey = key;
    const box = $("queue"), dr = $("drafts");
    const focused = editing && editing.ta && document.activeElement === editing.ta;
    box.replaceChildren();
    dr.replaceChildren();
    if (queue) {
      // A pause holds the items waiting when it began; with none left
      // the next prompt runs, so there is nothing to resume.
      if (queue.paused && queue.items.length) {
        const p = mosaic.el("div", "queue-paused");
        p.appendChild(mosaic.el("span", "", "queue paused" + (queue.pauseReason ? ": " + queue.pauseReason : "") + " · " + queue.items.length + " waiting"));
        p.appendChild(button("Resume", "queue-resume", canQueue(), () => queueOp("resume-queue", {}, "resume")));
        box.appendChild(p);
      }
      for (const it of queue.items) box.appendChild(chipNode(it));
      for (const it of queue.drafts) if (!dismissed.has(it.id)) dr.appendChild(draftNode(it));
      if (editing && !queue.items.some((it) => it.id === editing.id)) box.appendChild(orphanNode(editing));
      if (queue.items.length && !canQueue()) box.appendChild(mosaic.el("div", "meta", "read-only: only the controller may edit, cancel or resume queued prompts; take control to act"));
    }
    box.hidden = !box.children.length;
    dr.hidden = !dr.children.length;
    if (focused) editing.ta.focus();
  }

  // ---- records: stops, notices, records this page does not know ----
  // maxRecords bounds the records the page shows: the engine decides how
  // many it causes (an extension's status updates are a notice each), so
  // the oldest go and one line counts them.
  const maxRecords = 200;
  let droppedRecords = 0;

  function addRecord(node) {
    records.appendChild(node);
    let shown = records.querySelectorAll(":scope > .rec:not(.dropped)");
    if (shown.length <= maxRecords) return;
    let line = records.querySelector(":scope > .dropped");
    if (!line) {
      line = mosaic.el("div", "rec dropped");
      records.prepend(line);
    }
    for (let i = 0; i < shown.length - maxRecords; i++) {
      shown[i].remove();
      droppedRecords++;
    }
    line.textContent = droppedRecords + " earlier records are not shown (this page keeps the newest " + maxRecords + "); `mosaicctl audit " + id + "` lists the decisions and stops";
  }

  function record(r) {
    if (r.record === "stop") {
      stops.set(r.id, r);
      renderStop(r);
      if (r.state === "uncertain") notify("stop uncertain", r.reason || r.id);
      if (r.kind === "force-stop" && r.state === "stopped") notify("stopped with a proof", r.proofDigest || "");
      showDialogStop(r);
      return;
    }
    if (r.record === "web-reconcile") {
      reconciled(r.message);
      return;
    }
    if (r.record === "refusal") {
      addRecord(mosaic.el("div", "rec notice-rec", r.line));
      return;
    }
    if (r.record === "notice") {
      addRecord(mosaic.el("div", "rec notice-rec", "notice " + (r.line || r.kind + ": " + r.message)));
      return;
    }
    // Unknown records (a newer controller's) are shown as inert text and never acted on.
    const d = mosaic.el("details", "rec unknown");
    d.appendChild(mosaic.el("summary", "", (r.record === "unknown" ? r.kind : r.record) + " record"));
    d.appendChild(mosaic.el("pre", "", r.text || r.message || JSON.stringify(r)));
    addRecord(d);
  }

  // reconciled marks, under the transcript, that what the page shows was
  // read again rather than continued.
  function reconciled(message) {
    addRecord(mosaic.el("div", "rec reconcile", "— re-read: " + message));
  }

  function stopText(r) {
    let t = r.kind + " " + r.id + ": " + r.state;
    if (r.proofDigest) t += " · proof " + r.proofDigest;
    if (r.reason) t += " · " + r.reason;
    if (r.effects) {
      t += " · effects " + r.effects.disposition + ", " + r.effects.completed + " tool calls completed";
      for (const u of r.effects.uncertain || []) t += "; uncertain: " + u.tool + " " + u.callId + " (" + u.reason + ")";
    }
    if (r.approvalDisposition) t += " · approvals " + r.approvalDisposition;
    return t;
  }

  function renderStop(r) {
    let box = records.querySelector('[data-stop="' + CSS.escape(r.id) + '"]');
    if (!box) {
      box = mosaic.el("div", "rec stop");
      box.dataset.stop = r.id;
      addRecord(box);
    }
    box.replaceChildren(mosaic.el("div", "stop-line state-" + r.state, stopText(r)));
    if (r.proof) {
      const d = mosaic.el("details", "proof");
      d.appendChild(mosaic.el("summary", "", "proof"));
      d.appendChild(mosaic.el("pre", "", typeof r.proof === "string" ? r.proof : JSON.stringify(r.proof)));
      box.appendChild(d);
    }
  }

  // ---- stream ----
  function connect() {
    const url = "/api/c/" + encodeURIComponent(id) + "/events" + (tab ? "?tab=" + encodeURIComponent(tab) : "");
    es = new EventSource(url);
    es.addEventListener("state", (ev) => setState(JSON.parse(ev.data)));
    es.addEventListener("items", (ev) => patch(JSON.parse(ev.data)));
    es.addEventListener("record", (ev) => record(JSON.parse(ev.data)));
    es.addEventListener("approvals", (ev) => applyApprovals(JSON.parse(ev.data)));
    es.addEventListener("queue", (ev) => setQueue(JSON.parse(ev.data)));
    es.addEventListener("gone", (ev) => {
      es.close();
      const g = JSON.parse(ev.data);
      say(g.message, "bad");
      tab = "";
      // A revoked session stays logged out; a closed connection comes
      // back as a new observer.
      if (!g.final) setTimeout(connect, 1000);
    });
    es.onerror = () => {
      say("stream interrupted: reconnecting (this tab keeps its connection for 30 s and its place for 10 minutes)", "warn");
      if (es.readyState === EventSource.CLOSED) {
        setTimeout(connect, 1000);
      }
    };
    es.onopen = () => { if (notice.classList.contains("warn")) say(""); };
  }

  // ---- commands ----
  // bound says whether the page knows which execution and generation its
  // commands address: before the first bound state (the controller's
  // binding, after the welcome) nothing is sent, since a command naming
  // no execution and generation 0 would act on whatever the controller
  // runs, not on what the person sees.
  function bound() {
    if (view && view.bound && !view.dead) return true;
    say("not bound yet: this page does not know the conversation's execution and generation; nothing was sent (your text is kept)", "warn");
    return false;
  }

  // send posts an operation with the view it was decided on: the
  // generation and execution this page shows. A stale view is refused by
  // the controller (stale-generation), never acted on.
  async function send(op, extra) {
    if (!bound()) return null;
    const body = Object.assign({ tab: tab, op: op, generation: view.generation, execution: view.execution }, extra || {});
    const j = await mosaic.post("/api/c/" + encodeURIComponent(id) + "/command", body);
    if (j.refusal) say("refused " + j.refusal.code + ": " + j.refusal.message, "bad");
    else if (j.unknown) say("outcome unknown: " + j.unknown, "bad");
    else if (j.error) say(j.error, "bad");
    return j;
  }

  $("composer").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const t = text.value;
    if (!t.trim()) { say("nothing to send", "warn"); return; }
    // The text stays in the composer until the controller holds it: queued
    // durably (it is sent in turn; `mosaicctl queue` and attach show it),
    // or already sent.
    const j = await send("prompt", { text: t });
    if (j && j.reply) {
      const rc = j.reply;
      if (["queued", "dispatched", "acknowledged", "delivered"].includes(rc.state)) {
        if (text.value === t) text.value = "";
        say(rc.state === "queued" ? "queued (item " + rc.item + ", receipt " + rc.id + "): sent when the engine is free" :
          "sent (receipt " + rc.id + ")", "ok");
      } else {
        say("prompt " + rc.state + (rc.evidence ? ": " + rc.evidence : "") + (rc.reason ? " (" + rc.reason + ")" : "") + " — your text is kept", "bad");
        if (rc.state === "failed") notify("turn failed", rc.evidence || "");
      }
    }
  });
  text.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && (ev.ctrlKey || ev.metaKey)) { ev.preventDefault(); $("composer").requestSubmit(); }
  });

  $("take").addEventListener("click", async () => {
    const j = await send("takeover");
    if (j && j.reply) say("this tab is the controller (generation " + j.reply.generation + ")", "ok");
    else if (j && j.refusal && j.refusal.code === "fenced") say("refused fenced: " + j.refusal.message + " — Recover… acquires recovery control", "bad");
  });
  $("interrupt").addEventListener("click", async () => {
    say("interrupting…");
    const j = await send("interrupt");
    if (j && j.reply) say("interrupt " + j.reply.state + (j.reply.stop ? " (stop " + j.reply.stop + ")" : ""), j.reply.state === "reconciled" ? "ok" : "warn");
  });
  $("older").addEventListener("click", () => send("older"));
  $("notify").addEventListener("click", () => {
    if (!("Notification" in window)) { say("this browser has no notifications", "warn"); return; }
    Notification.requestPermission().then((p) => say("notifications: " + p));
  });

  function notify(title, body) {
    if (!("Notification" in window) || Notification.permission !== "granted" || !document.hidden) return;
    try { new Notification("mosaic " + id + ": " + title, { body: String(body).slice(0, 200) }); } catch (e) { /* not permitted here */ }
  }

  // ---- the confirmation dialog (force stop, recover, recovery control) ----
  const dlg = $("confirm");
  let pending = null; // {operation, confirmation, stop}

  async function confirmFlow(operation, title) {
    const j = await send("issue-confirmation", { operation: operation });
    if (!j || !j.reply) return;
    const c = j.reply;
    pending = { operation: operation, confirmation: c.id, stop: "" };
    $("confirm-title").textContent = title;
    $("confirm-intent").textContent = c.intent;
    $("confirm-meta").textContent = "confirmation " + c.id + " · execution " + (c.execution || "-") + " · generation " + c.generation + " · expires " + c.expires;
    $("confirm-result").replaceChildren();
    $("confirm-yes").hidden = false;
    $("confirm-yes").disabled = false;
    $("confirm-no").textContent = "Cancel";
    dlg.showModal();
  }

  // stopUnknown is what the dialog says when a force stop's answer was
  // lost: the engine may or may not be stopped, and where to look.
  function stopUnknown(j) {
    return "force stop outcome unknown: " + ((j && (j.unknown || j.error)) || "no answer") +
      ". The engine may or may not be stopped: `mosaicctl status " + id + "` shows the last stop, `mosaicctl audit " + id +
      "` its record and proof; this page shows the stop record if it arrives. Do not assume it stopped.";
  }

  // lostText is what the dialog says when another operation's answer was
  // lost: it may or may not have been carried out.
  function lostText(what, j) {
    return what + " outcome unknown: " + ((j && (j.unknown || j.error)) || "no answer") +
      ". `mosaicctl status " + id + "` shows the conversation's binding and execution now.";
  }

  function result(t, cls) {
    $("confirm-result").appendChild(mosaic.el("p", "result " + (cls || ""), t));
  }

  function showDialogStop(r) {
    if (!pending || !dlg.open || pending.stop !== r.id) return;
    $("confirm-result").replaceChildren(mosaic.el("p", "result state-" + r.state, stopText(r)));
    if (r.proof) {
      const d = mosaic.el("details", "proof");
      d.open = true;
      d.appendChild(mosaic.el("summary", "", "proof"));
      d.appendChild(mosaic.el("pre", "", r.proof));
      $("confirm-result").appendChild(d);
    }
  }

  $("confirm-no").addEventListener("click", async () => {
    if (pending && $("confirm-yes").hidden === false) {
      await send("answer-confirmation", { confirmation: pending.confirmation, answer: "decline" });
      say("declined: nothing was done");
    }
    pending = null;
    dlg.close();
  });

  $("confirm-yes").addEventListener("click", async () => {
    if (!pending) return;
    $("confirm-yes").disabled = true;
    const p = pending;
    const a = await send("answer-confirmation", { confirmation: p.confirmation, answer: "confirm" });
    if (!a || !a.reply) { result("the confirmation was refused: " + (a && a.refusal ? a.refusal.message : "no answer"), "bad"); return; }
    $("confirm-yes").hidden = true;
    $("confirm-no").textContent = "Close";
    if (p.operation === "force-stop") {
      result("stopping…");
      const j = await send("force-stop", { confirmation: p.confirmation });
      if (j && j.reply) {
        p.stop = j.reply.stop;
        const s = stops.get(p.stop);
        if (s) showDialogStop(s); else result("force stop " + j.reply.state + " (stop " + j.reply.stop + ")");
      } else if (j && j.refusal) result("refused " + j.refusal.code + ": " + j.refusal.message, "bad");
      else result(stopUnknown(j), "bad");
    } else if (p.operation === "recover") {
      const j = await send("recover", { confirmation: p.confirmation });
      if (!j || !j.reply) { result(j && j.refusal ? "refused " + j.refusal.code + ": " + j.refusal.message : lostText("recover", j), "bad"); return; }
      const el = j.reply;
      result("eligible after stop " + el.stop + " (proof " + el.proofDigest + "); launching…");
      const l = await send("launch", { eligibility: el.id, generation: el.generation });
      if (l && l.reply) result("launch " + l.reply.state + ": execution " + l.reply.execution + ", generation " + l.reply.generation, l.reply.state === "launched" ? "ok" : "bad");
      else if (l && l.refusal) result("refused " + l.refusal.code + ": " + l.refusal.message, "bad");
      else result(lostText("launch", l), "bad");
    } else if (p.operation === "acquire-recovery-control") {
      const j = await send("acquire-recovery-control", { confirmation: p.confirmation });
      if (j && j.reply) result("this tab holds recovery control (generation " + j.reply.generation + ")", "ok");
      else if (j && j.refusal) result("refused " + j.refusal.code + ": " + j.refusal.message, "bad");
      else result(lostText("recovery control", j), "bad");
    }
  });

  $("stop").addEventListener("click", () => {
    if (!bound()) return;
    if (view.mode !== "controller") { say("force stop needs control: take control first (or Recover… for recovery control)", "warn"); return; }
    confirmFlow("force-stop", "Force stop");
  });
  $("recover").addEventListener("click", () => {
    if (!bound()) return;
    if (view.mode !== "controller") { confirmFlow("acquire-recovery-control", "Take recovery control"); return; }
    confirmFlow("recover", "Recover");
  });

  // The fixed footer grows with the chips and the approvals: the
  // transcript keeps room for it, so its last lines are never under it.
  if ("ResizeObserver" in window) {
    new ResizeObserver(() => { $("transcript-wrap").style.paddingBottom = ($("controls").offsetHeight + 16) + "px"; }).observe($("controls"));
  }

  // The view this page acts on, for a person's console and the tests.
  window.mosaicState = () => Object.assign({}, view);
  // What the page holds besides its DOM, for the tests of its bounds.
  window.mosaicHeld = () => ({ notified: notified.size });

  connect();
})();
