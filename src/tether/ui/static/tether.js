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
        if (body.done && (body.status === "failed" || body.status === "cancelled" || body.status === "paused")) {
          // It failed (or paused again) while the page followed it: drawn again once, so that
          // the failure is the page's one error panel (traceback folded), or its calls wait
          // with their buttons, as a reload shows it.
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

// A paused run's page: each pending call's decision (Approve / Edit / Deny, or the result of an
// external call), sent in one POST to /api/runs/{id}/decisions once every call has one; then
// the page is drawn again and follows the resumed run live. A page logged in by cookie proves
// it is this server's own with the session's CSRF token.
(function () {
  "use strict";
  var section = document.getElementById("pending");
  if (!section || !section.querySelector("button")) return;
  var url = section.getAttribute("data-decisions-url");
  var csrf = section.getAttribute("data-csrf");
  var errorEl = section.querySelector(".pending-error");
  var calls = section.querySelectorAll(".pending-call");
  var decisions = {};

  function fail(message) {
    errorEl.textContent = message;
    errorEl.hidden = false;
  }

  function decisionOf(call, action) {
    if (action === "deny") return { action: "deny", reason: "denied in the UI" };
    if (action === "result") {
      var text = call.querySelector(".pending-result").value;
      try { return { action: "result", output: JSON.parse(text) }; }
      catch (e) { return { action: "result", output: text }; }
    }
    var edit = call.querySelector(".pending-edit");
    if (edit && !edit.hidden) return { action: "approve", input: JSON.parse(edit.value) };
    return { action: "approve" };
  }

  function send() {
    var headers = { "Content-Type": "application/json", Accept: "application/json" };
    if (csrf) headers["x-tether-csrf"] = csrf;
    section.setAttribute("data-busy", "1");
    fetch(url, { method: "POST", headers: headers, body: JSON.stringify({ decisions: decisions }) })
      .then(function (response) {
        if (response.ok) { window.location.reload(); return null; }
        return response.json().then(function (body) {
          throw new Error((body.error && body.error.message) || "HTTP " + response.status);
        });
      })
      .catch(function (error) {
        section.removeAttribute("data-busy");
        decisions = {};
        calls.forEach(function (call) { call.querySelector(".pending-choice").hidden = true; });
        fail("The decisions were not taken: " + error.message);
      });
  }

  section.addEventListener("click", function (event) {
    var button = event.target.closest("button[data-action]");
    if (!button || section.hasAttribute("data-busy")) return;
    var call = button.closest(".pending-call");
    var action = button.getAttribute("data-action");
    if (action === "edit") {
      var edit = call.querySelector(".pending-edit");
      edit.hidden = !edit.hidden;
      if (!edit.hidden) edit.focus();
      return;
    }
    var decision;
    try { decision = decisionOf(call, action); }
    catch (e) { fail("The edited input is not JSON: " + e.message); return; }
    errorEl.hidden = true;
    decisions[call.getAttribute("data-call-id")] = decision;
    var choice = call.querySelector(".pending-choice");
    choice.textContent = "Your decision: " + decision.action + (calls.length > 1 ? " (sent once every call has one)" : "");
    choice.hidden = false;
    if (Object.keys(decisions).length === calls.length) send();
  });
})();
