// Live updates for a running run's page: poll /api/events/{id}?after=N&html=1 and put in what
// arrives. The server renders each new event with the page's own template (Markdown rendered
// safely, every value escaped), so a live event reads exactly as it will after a reload; this
// script only places those fragments (parsed in an inert <template>) and never builds markup
// from data. The Content-Security-Policy allows no inline script, whatever a fragment held.
(function () {
  "use strict";
  var timeline = document.querySelector("ol[data-live-run]");
  if (!timeline) return;
  var url = timeline.getAttribute("data-events-url");
  var after = parseInt(timeline.getAttribute("data-after"), 10) || 0;
  var statusEl = document.getElementById("run-status");
  var showStorage = /[?&]storage=1(&|$)/.test(window.location.search);

  function place(fragment, shown) {
    var holder = document.createElement("template");
    holder.innerHTML = fragment.html;
    var li = holder.content.firstElementChild;
    if (!li) return;
    var old = null;
    if (fragment.seq <= shown) {
      // An item the page has (the text item being streamed): drawn again whole, in its place.
      var seq = String(fragment.seq);
      for (var node = timeline.lastElementChild; node; node = node.previousElementSibling) {
        if (node.getAttribute("data-seq") === seq) { old = node; break; }
      }
    }
    if (old) {
      timeline.replaceChild(li, old);
    } else {
      timeline.appendChild(li);
    }
    var empty = document.getElementById("no-events");
    if (empty) empty.remove();
  }

  function runningCall() {
    // The page's last model call, when it is still drawn as running: drawn again once it ends.
    var calls = timeline.querySelectorAll("li.ev-model-call-started");
    var last = calls.length ? calls[calls.length - 1] : null;
    if (last && !last.querySelector(".call-facts")) return last.getAttribute("data-seq");
    return null;
  }

  function openText() {
    // The page's last item, when it is text the next events may extend: it is sent again whole.
    var last = timeline.lastElementChild;
    if (last && last.classList.contains("ev-text")) return last.getAttribute("data-seq");
    return null;
  }

  function setStatus(status) {
    if (!statusEl || !status) return;
    statusEl.textContent = status;
    statusEl.className = "status status-" + status;
  }

  function stop(message) {
    var note = document.getElementById("live-note");
    if (note) note.textContent = message;
    timeline.setAttribute("data-live-done", "1");
  }

  function poll() {
    // The URL may carry the run's id in its query already (a run called "." or "..").
    var query = (url.indexOf("?") === -1 ? "?" : "&") + "after=" + after + "&html=1";
    var open = openText();
    if (open) query += "&open=" + encodeURIComponent(open);
    var running = runningCall();
    if (running) query += "&running=" + encodeURIComponent(running);
    if (showStorage) query += "&storage=1";
    fetch(url + query, { headers: { Accept: "application/json" }, cache: "no-store" })
      .then(function (response) {
        // Gone for good (another store, a deleted row): asking again will not bring it back.
        if (response.status === 404) return { gone: true };
        if (!response.ok) throw new Error("HTTP " + response.status);
        return response.json();
      })
      .then(function (body) {
        if (body.gone) {
          stop("This run is no longer in the store.");
          return;
        }
        var shown = after;
        (body.html || []).forEach(function (fragment) { place(fragment, shown); });
        after = body.last_seq;
        timeline.setAttribute("data-after", String(after));
        setStatus(body.status);
        if (body.done && (body.status === "failed" || body.status === "cancelled")) {
          // It failed while the page followed it: drawn again once, so that the failure is the
          // page's one error panel (traceback folded), as a reload shows it.
          window.location.reload();
        } else if (body.done) {
          stop("The run is " + body.status + ".");
        } else {
          window.setTimeout(poll, 1000);
        }
      })
      // The server is restarting or the network is down: try again, a little later.
      .catch(function () { window.setTimeout(poll, 3000); });
  }

  window.setTimeout(poll, 1000);
})();
