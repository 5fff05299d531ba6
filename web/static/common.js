// Shared helpers. Every piece of text from the server is put into the page
// with textContent, never as markup: this file and the others never use
// innerHTML, insertAdjacentHTML, document.write or a URL built from text.
"use strict";

const mosaic = {
  csrf: document.querySelector('meta[name="csrf"]').content,

  el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  },

  // post sends a state change: same origin, the session cookie, the CSRF
  // token in a header. The answer is the server's JSON. An answer lost on
  // the way (the connection dropped after the request left) is
  // {unknown}: the server may have done it, so the caller must not report
  // success, nor failure.
  async post(path, body) {
    let r;
    try {
      r = await fetch(path, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-Mosaic-CSRF": mosaic.csrf },
        body: JSON.stringify(body),
      });
    } catch (e) {
      return { unknown: "the answer was lost (" + e.message + "): the command may or may not have been carried out" };
    }
    let j;
    try { j = await r.json(); } catch (e) { j = { error: "the server answered HTTP " + r.status }; }
    return j;
  },

  logout() {
    mosaic.post("/logout", {}).then(() => { location.href = "/"; });
  },
};

const lo = document.getElementById("logout");
if (lo) lo.addEventListener("click", mosaic.logout);
