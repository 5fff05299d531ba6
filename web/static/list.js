"use strict";

(function () {
  const rows = document.getElementById("rows");
  const conn = document.getElementById("conn");
  const errorP = document.getElementById("error");
  const empty = document.getElementById("empty");

  function cell(tr, text, cls) {
    const td = mosaic.el("td", cls, text);
    tr.appendChild(td);
    return td;
  }

  function render(list) {
    rows.replaceChildren();
    empty.hidden = list.length > 0;
    for (const r of list) {
      const tr = mosaic.el("tr");
      tr.dataset.id = r.id;
      const td = mosaic.el("td");
      const a = mosaic.el("a", "conv-link", r.id);
      // The id is checked server-side to be a conversation id
      // ([a-z0-9-]); the path is built from it and nothing else.
      a.href = "/c/" + encodeURIComponent(r.id);
      td.appendChild(a);
      td.appendChild(mosaic.el("div", "meta", r.project + " · " + r.seat));
      tr.appendChild(td);
      const waiting = r.approvals !== null && r.approvals > 0;
      cell(tr, (r.service === "active" ? (r.engineState || "-") : "controller " + r.service) + (waiting ? " · waiting for approval" : ""),
        "engine " + (r.engineState || "") + (waiting ? " warn" : ""));
      cell(tr, r.state || "-");
      cell(tr, r.generation === null ? "-" : r.generation);
      cell(tr, r.controller ? (r.controllerConnected ? "held" : "held (disconnected)") : "none");
      cell(tr, r.approvals === null ? "-" : (waiting ? r.approvals + " pending" : "0"), "approvals" + (waiting ? " warn" : ""));
      cell(tr, r.queue === null ? "-" : r.queue + " waiting" + (r.queuePaused ? " · paused" : ""), "queue" + (r.queuePaused ? " warn" : ""));
      cell(tr, r.lastStop || (r.engineEnd ? "engine ended: " + r.engineEnd : "-"));
      if (r.error) tr.appendChild(mosaic.el("td", "error", r.error));
      rows.appendChild(tr);
    }
  }

  const es = new EventSource("/api/conversations");
  es.addEventListener("rows", (ev) => {
    const j = JSON.parse(ev.data);
    conn.textContent = "live";
    conn.className = "pill ok";
    if (j.error) { errorP.hidden = false; errorP.textContent = j.error; return; }
    errorP.hidden = true;
    render(j.rows);
  });
  es.addEventListener("gone", (ev) => {
    es.close();
    conn.textContent = JSON.parse(ev.data).message;
    conn.className = "pill bad";
  });
  es.onerror = () => { conn.textContent = "reconnecting…"; conn.className = "pill warn"; };
})();
