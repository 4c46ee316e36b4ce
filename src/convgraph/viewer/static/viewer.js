// convgraph viewer: follow a conversation's event stream and re-render its live part.
// Hand-written and small; loaded as a file (the Content-Security-Policy runs no inline code).
// Server HTML arrives through DOMParser, which never runs scripts, and is escaped by the server.
"use strict";
(function () {
  const live = document.getElementById("live");
  const status = document.getElementById("live-status");
  if (!live || !live.dataset.events) {
    return;
  }
  let busy = false;
  let again = false;
  let arrived = 0;

  function say(text, kind) {
    if (status) {
      status.textContent = text;
      status.className = "badge" + (kind ? " " + kind : "");
    }
  }

  function known() {
    return new Set(Array.from(live.querySelectorAll("[data-cid]"), (el) => el.getAttribute("data-cid")));
  }

  async function refresh() {
    if (busy) {
      again = true;
      return;
    }
    busy = true;
    try {
      const before = known();
      const response = await fetch(live.dataset.fragment, { credentials: "same-origin", cache: "no-store" });
      if (!response.ok) {
        throw new Error("HTTP " + response.status);
      }
      const doc = new DOMParser().parseFromString(await response.text(), "text/html");
      const next = doc.getElementById("live");
      if (next) {
        live.replaceChildren(...Array.from(next.childNodes, (node) => document.importNode(node, true)));
        for (const el of live.querySelectorAll("[data-cid]")) {
          if (!before.has(el.getAttribute("data-cid"))) {
            el.classList.add("fresh");
          }
        }
      }
      say("live · " + arrived + " new", "live");
    } catch (err) {
      say("live · refresh failed (" + err.message + ")", "warn");
    } finally {
      busy = false;
    }
    if (again) {
      again = false;
      refresh();
    }
  }

  const source = new EventSource(live.dataset.events);
  source.addEventListener("ready", () => say("live", "live"));
  source.addEventListener("record", () => {
    arrived += 1;
    refresh();
  });
  source.addEventListener("forbidden", () => {
    source.close();
    say("access ended", "bad");
  });
  source.addEventListener("error", () => say("reconnecting…", "warn"));
})();
