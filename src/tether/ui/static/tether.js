// Live updates for a running run's page: poll /api/events/{id}?after=N and append what
// arrives. Every value from the server is set with textContent, never parsed as markup.
(function () {
  "use strict";
  var timeline = document.querySelector("ol[data-live-run]");
  if (!timeline) return;
  var url = timeline.getAttribute("data-events-url");
  var after = parseInt(timeline.getAttribute("data-after"), 10) || 0;
  var statusEl = document.getElementById("run-status");
  var runStart = parseFloat(timeline.getAttribute("data-start")) || 0;
  var showStorage = /[?&]storage=1(&|$)/.test(window.location.search);

  function el(tag, cls, text) {
    var node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function pretty(value) {
    if (typeof value === "string") return value;
    try { return JSON.stringify(value, null, 2); } catch (e) { return String(value); }
  }

  function valueBlock(value) { return el("pre", "value", pretty(value)); }

  function label(text, extra) { return el("span", "label" + (extra ? " " + extra : ""), text); }

  function code(text, cls) { return el("code", cls || "", text); }

  function item(kind, seq, at) {
    var li = el("li", "ev ev-" + String(kind).replace(/_/g, "-"));
    li.setAttribute("data-seq", String(seq));
    li.id = "ev-" + seq;
    if (runStart > 0 && typeof at === "number") {
      li.appendChild(el("span", "rel muted", "+" + (at - runStart).toFixed(3) + " s"));
    }
    return li;
  }

  function secs(value) {
    if (typeof value !== "number") return "\u2014";
    return value < 1 ? Math.round(value * 1000) + " ms" : value.toFixed(1) + " s";
  }

  function tokens(usage) {
    if (!usage || typeof usage !== "object") return "\u2014";
    return (usage.input_tokens || 0) + " \u2192 " + (usage.output_tokens || 0);
  }

  function finish(li, seq) {
    var s = el("span", "seq muted", "#" + seq);
    li.appendChild(s);
    timeline.appendChild(li);
    var empty = document.getElementById("no-events");
    if (empty) empty.remove();
  }

  function panel(cls, title, body) {
    var box = el("div", "panel " + cls);
    box.appendChild(el("strong", "", title));
    if (body !== undefined) box.appendChild(body);
    return box;
  }

  function append(ev) {
    var d = ev.data || {};
    var seq = ev.seq;
    var li;
    if (ev.type === "agent_text_delta") {
      var last = timeline.lastElementChild;
      var chunk = typeof d.text === "string" ? d.text : JSON.stringify(d.text);
      if (last && last.classList.contains("ev-text")) {
        last.querySelector("pre.text").textContent += chunk;
        var first = last.getAttribute("data-seq");
        last.querySelector(".seq").textContent = "#" + first + "\u2013" + seq;
        return;
      }
      li = item("text", seq, ev.at);
      li.appendChild(label("text"));
      li.appendChild(el("pre", "text", chunk));
      finish(li, seq);
      return;
    }
    if (ev.type === "agent_messages_committed" && !showStorage) return;
    li = item(ev.type, seq, ev.at);
    switch (ev.type) {
      case "model_call_started":
        li.appendChild(label("model call " + d.call));
        li.appendChild(code(d.model));
        break;
      case "model_call_finished":
        li.appendChild(label("model call " + d.call + " done"));
        li.appendChild(document.createTextNode(secs(d.duration_s) + " (first token " +
          secs(d.first_token_s) + ") \u00b7 " + tokens(d.usage) + " \u00b7 " +
          (typeof d.cost_usd === "number" ? "$" + d.cost_usd.toFixed(6) : "\u2014")));
        break;
      case "model_call_failed":
        li.appendChild(label("model call " + d.call + " failed", "is-error"));
        li.appendChild(code((d.error || {}).type));
        break;
      case "agent_tool_call":
        li.appendChild(label("tool call"));
        li.appendChild(code(d.name, "tool-name"));
        li.appendChild(el("span", "muted", " " + (d.id || "")));
        li.appendChild(valueBlock(d.input));
        break;
      case "agent_tool_result":
        li.appendChild(label(d.is_error ? "tool error" : "tool result", d.is_error ? "is-error" : ""));
        li.appendChild(code(d.name, "tool-name"));
        li.appendChild(el("span", "muted", " " + (d.id || "")));
        li.appendChild(valueBlock(d.output));
        break;
      case "agent_messages_committed":
        li.appendChild(label("stored"));
        li.appendChild(el("span", "muted", d.count === 1 ? "record " + d.start
          : "records " + d.start + "\u2013" + (d.start + d.count - 1)));
        break;
      case "agent_warning":
        li.appendChild(panel("panel-warning", "warning " + (d.code || ""), el("pre", "", d.message)));
        break;
      case "agent_failed":
        var err = d.error || {};
        var box = panel("panel-error", d.cancelled ? "cancelled" : "failed", code(err.type));
        box.appendChild(el("pre", "", err.message));
        if (d.text) box.appendChild(el("pre", "text", d.text));
        li.appendChild(box);
        break;
      case "agent_finished":
        li.appendChild(label("finished"));
        li.appendChild(document.createTextNode(
          d.turns + " model request" + (d.turns === 1 ? "" : "s") +
          (d.stop_reason ? " \u00b7 stop reason " + d.stop_reason : "")));
        if (d.output !== null && d.output !== undefined && d.output !== d.text) {
          li.appendChild(label("output"));
          li.appendChild(valueBlock(d.output));
        }
        break;
      case "agent_started":
        li.appendChild(label("started"));
        li.appendChild(document.createTextNode("agent "));
        li.appendChild(code(d.agent_id));
        break;
      case "workflow_step_started":
        li.appendChild(label("step started"));
        li.appendChild(code(d.step_id));
        break;
      case "workflow_step_finished":
        li.appendChild(label(d.replayed ? "step replayed" : "step finished"));
        li.appendChild(code(d.step_id));
        li.appendChild(valueBlock(d.output));
        break;
      case "workflow_step_failed":
        li.appendChild(panel("panel-error", "step failed " + d.step_id, valueBlock(d.error)));
        break;
      case "workflow_finished":
        li.appendChild(label("workflow finished"));
        li.appendChild(valueBlock(d.output));
        break;
      case "workflow_failed":
        li.appendChild(panel("panel-error", "workflow " + (d.status || "failed"), valueBlock(d.error)));
        break;
      default:
        li.appendChild(label(ev.type));
        li.appendChild(valueBlock(d));
    }
    finish(li, seq);
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
    var query = (url.indexOf("?") === -1 ? "?" : "&") + "after=" + after;
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
        (body.events || []).forEach(append);
        after = body.last_seq;
        timeline.setAttribute("data-after", String(after));
        setStatus(body.status);
        if (body.done) {
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
