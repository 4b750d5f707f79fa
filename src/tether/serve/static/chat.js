// The chat page: start a run, follow its stream, cancel it. Everything from the server goes on
// the page as text (textContent), never as markup.
(() => {
  "use strict";
  const root = document.getElementById("chat");
  if (!root) return;
  const base = root.dataset.base;
  const agent = root.dataset.agent;
  let scope = root.dataset.scope || "";
  const log = document.getElementById("chat-log");
  const form = document.getElementById("chat-form");
  const input = document.getElementById("chat-input");
  const attach = document.getElementById("chat-attach");
  const sendButton = document.getElementById("chat-send");
  const cancelButton = document.getElementById("chat-cancel");
  const statusLine = document.getElementById("chat-status");
  const scopeLine = document.getElementById("chat-scope");
  const scopeList = document.getElementById("chat-scope-list");
  const newButton = document.getElementById("chat-new");

  const timelineRun = document.getElementById("chat-timeline-run");
  const timelineBars = document.getElementById("chat-timeline-bars");

  let source = null;
  let runId = null;
  let bubble = null;
  let lastSeq = 0;
  const tools = new Map();

  const path = (s) => encodeURIComponent(s);
  // A page logged in by cookie proves it is this server's own with the session's CSRF token.
  const guard = root.dataset.csrf ? { "x-tether-csrf": root.dataset.csrf } : {};

  function element(tag, className, text) {
    const node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  }

  function scrollDown() {
    log.lastElementChild && log.lastElementChild.scrollIntoView({ block: "end" });
  }

  function addMessage(role, text) {
    const item = element("li", "chat-msg chat-" + role);
    item.appendChild(element("span", "chat-role", role === "user" ? "You" : agent));
    const body = element("div", "chat-text", text || "");
    item.appendChild(body);
    log.appendChild(item);
    scrollDown();
    return body;
  }

  function addToolCall(id, name, args) {
    const item = element("li", "chat-tool");
    item.dataset.toolCallId = id;
    item.appendChild(element("span", "chat-tool-name", "Tool call: " + name));
    item.appendChild(element("pre", "chat-tool-input", JSON.stringify(args, null, 2)));
    const result = element("pre", "chat-tool-result", "…");
    item.appendChild(result);
    log.appendChild(item);
    tools.set(id, result);
    scrollDown();
  }

  function setToolResult(id, output, isError) {
    const result = tools.get(id);
    if (!result) return;
    result.textContent = typeof output === "string" ? output : JSON.stringify(output);
    if (isError) result.classList.add("chat-error");
  }

  function addNote(kind, text) {
    log.appendChild(element("li", "chat-note chat-" + kind, text));
    scrollDown();
  }

  function setStatus(text) {
    statusLine.textContent = text;
  }

  function setBusy(busy) {
    sendButton.disabled = busy;
    cancelButton.disabled = !busy;
    root.dataset.busy = busy ? "1" : "";
  }

  function showScope() {
    scopeLine.textContent = scope || "new";
    const url = new URL(window.location.href);
    if (scope) url.searchParams.set("scope", scope);
    else url.searchParams.delete("scope");
    window.history.replaceState(null, "", url);
  }

  function renderRecord(record) {
    const parts = Array.isArray(record.content) ? record.content : [];
    const text = parts.filter((p) => p.type === "text").map((p) => p.text).join("");
    if (record.role === "user") {
      addMessage("user", text);
    } else if (record.role === "assistant") {
      if (text) addMessage("assistant", text);
      for (const p of parts) if (p.type === "tool_call") addToolCall(p.id, p.name, p.input);
    } else if (record.role === "tool") {
      for (const p of parts) if (p.type === "tool_result") setToolResult(p.id, p.output, p.is_error);
    }
  }

  async function loadHistory() {
    log.textContent = "";
    tools.clear();
    if (!scope) return;
    const answer = await fetch(base + "/api/scopes/" + path(scope) + "?agent=" + path(agent));
    if (!answer.ok) return;
    const body = await answer.json();
    const records = [];
    for (const turn of body.turns || []) for (const r of turn.records || []) records.push(r);
    records.sort((a, b) => a.index - b.index);
    for (const r of records) renderRecord(r.record);
  }

  async function loadScopes() {
    const answer = await fetch(base + "/api/scopes?limit=50");
    if (!answer.ok) return;
    const body = await answer.json();
    scopeList.textContent = "";
    for (const s of body.scopes || []) {
      if (s.agent_id && s.agent_id !== agent) continue;
      const item = element("li");
      const link = element("a", s.scope === scope ? "chat-current" : "", s.title || s.scope);
      link.href = base + "/chat/" + path(agent) + "?scope=" + path(s.scope);
      link.addEventListener("click", (event) => {
        event.preventDefault();
        if (runId) return;
        scope = s.scope;
        showScope();
        loadHistory();
        loadScopes();
      });
      item.appendChild(link);
      scopeList.appendChild(item);
    }
  }

  // The run's timeline (the inspection UI's /api/runs/{id}: one bar per model call and tool
  // call), drawn beside the conversation; read again as calls end, at most one read at a time.
  let timelineOf = null;
  let timelineBusy = false;
  let timelineAgain = false;

  async function loadTimeline(id) {
    timelineOf = id;
    if (timelineBusy) { timelineAgain = true; return; }
    timelineBusy = true;
    try {
      const answer = await fetch(base + "/api/runs/" + path(id));
      if (answer.ok && timelineOf === id) drawTimeline(id, await answer.json());
    } finally {
      timelineBusy = false;
      if (timelineAgain) { timelineAgain = false; loadTimeline(timelineOf); }
    }
  }

  function drawTimeline(id, view) {
    timelineRun.textContent = "";
    const link = element("a", null, "Run " + id);
    link.href = base + "/runs/" + path(id);
    timelineRun.appendChild(link);
    const total = view.timeline ? view.timeline.total_s : 0;
    if (view.timeline) timelineRun.appendChild(document.createTextNode(" · " + total.toFixed(2) + " s"));
    timelineBars.textContent = "";
    const span = Math.max(total, 1e-6);
    for (const bar of (view.timeline ? view.timeline.bars : [])) {
      const item = element("li", "chat-bar chat-bar-" + bar.kind + " chat-bar-" + bar.status);
      const label = element("span", "chat-bar-label");
      label.appendChild(element("span", null, bar.label));
      label.appendChild(element("span", null, bar.duration_s.toFixed(2) + " s"));
      item.appendChild(label);
      const track = element("span", "chat-bar-track");
      const fill = element("span", "chat-bar-fill");
      fill.style.left = (100 * (bar.start - view.timeline.start) / span) + "%";
      fill.style.width = (100 * bar.duration_s / span) + "%";
      track.appendChild(fill);
      item.appendChild(track);
      timelineBars.appendChild(item);
    }
  }

  // A paused run's calls, each with its choices under it: Approve / Edit / Deny for an
  // approval (Edit opens the arguments as JSON; the server checks them against the tool's
  // schema), a result (JSON or text) for a call the caller runs, an answer (a JSON object)
  // for a tool that asks for input. Once every call has a decision they go in one POST with
  // the session's CSRF token; a decision the server refuses shows its error under its call,
  // to be decided again, and the run's stream is followed on from the last event seen.
  function askDecisions(id, pending) {
    const decisions = {};
    const boxes = new Map();
    setStatus("Waiting for your decision.");
    for (const call of pending) {
      const box = decisionBox(call, (decision, label) => {
        decisions[call.id] = decision;
        box.lock(label);
        if (Object.keys(decisions).length === pending.length) sendDecisions(id, decisions, boxes);
      });
      boxes.set(call.id, box);
      const result = tools.get(call.id);
      const holder = result ? result.parentElement : null;
      (holder || log).appendChild(box.node);
    }
    scrollDown();
  }

  function fieldsOf(schema) {
    const properties = schema && typeof schema.properties === "object" ? schema.properties : {};
    const required = Array.isArray(schema && schema.required) ? schema.required : [];
    return Object.keys(properties).map((name) => {
      const spec = properties[name] || {};
      const notes = [spec.type || "any"];
      if (required.includes(name)) notes.push("required");
      if ("default" in spec) notes.push("default " + JSON.stringify(spec.default));
      return name + " (" + notes.join(", ") + ")";
    });
  }

  function decisionBox(call, decide) {
    const node = element("div", "chat-decide");
    node.dataset.callId = call.id;
    node.dataset.kind = call.kind;
    const what = call.kind === "approval" ? "Allow " + call.name + "?"
      : call.kind === "input" ? call.name + " asks: " + (call.message || "")
      : "The result of " + call.name + "?";
    const head = element("p", "chat-decide-what", what);
    if (call.reason) head.appendChild(element("span", "chat-decide-reason", " (" + call.reason + ")"));
    node.appendChild(head);
    if (call.kind === "input") {
      const fields = fieldsOf(call.schema);
      if (fields.length) node.appendChild(element("p", "chat-decide-fields", "Fields: " + fields.join("; ")));
    }
    const text = element("textarea", "chat-decide-text");
    text.rows = 3;
    node.appendChild(text);
    const error = element("p", "chat-decide-error chat-error");
    error.setAttribute("role", "alert");
    error.hidden = true;
    const buttons = element("p", "chat-decide-buttons");
    node.appendChild(buttons);
    node.appendChild(error);
    let choice = null;
    const fail = (message) => { error.textContent = message; error.hidden = false; };
    const button = (action, label, onClick) => {
      const b = element("button", "chat-decide-" + action, label);
      b.type = "button";
      b.dataset.action = action;
      b.addEventListener("click", () => { error.hidden = true; onClick(); });
      buttons.appendChild(b);
    };
    if (call.kind === "approval") {
      text.classList.add("chat-decide-edit");
      text.value = JSON.stringify(call.input, null, 2);
      text.hidden = true;
      text.setAttribute("aria-label", "Edited arguments of " + call.name + " (JSON)");
      button("approve", "Approve", () => {
        if (text.hidden) { decide({ action: "approve" }, "approved"); return; }
        let edited;
        try { edited = JSON.parse(text.value); }
        catch (e) { fail("The edited arguments are not JSON: " + e.message); return; }
        decide({ action: "approve", input: edited }, "approved with edited arguments");
      });
      button("edit", "Edit", () => {
        text.hidden = !text.hidden;
        if (!text.hidden) text.focus();
      });
    } else if (call.kind === "input") {
      text.placeholder = "your answer, a JSON object";
      text.setAttribute("aria-label", "Answer to " + call.name + " (a JSON object)");
      button("result", "Send answer", () => {
        let value = null;
        try { value = JSON.parse(text.value); } catch (e) { value = null; }
        if (!value || typeof value !== "object" || Array.isArray(value)) {
          fail('The answer must be a JSON object, like {"name": "Ada"}.');
          return;
        }
        decide({ action: "result", output: value }, "answered");
      });
    } else {
      text.placeholder = "the result (JSON or text)";
      text.setAttribute("aria-label", "Result of " + call.name + " (JSON or text)");
      button("result", "Send result", () => {
        let output;
        try { output = JSON.parse(text.value); } catch (e) { output = text.value; }
        decide({ action: "result", output: output }, "result given");
      });
    }
    button("deny", call.kind === "input" ? "Decline" : "Deny",
      () => decide({ action: "deny", reason: "denied in the chat" }, "denied"));
    const controls = () => node.querySelectorAll("button, textarea");
    return {
      node,
      lock(label) {
        controls().forEach((c) => { c.disabled = true; });
        choice = element("span", "chat-decide-choice", " " + label);
        buttons.appendChild(choice);
      },
      unlock(message) {
        controls().forEach((c) => { c.disabled = false; });
        if (choice) { choice.remove(); choice = null; }
        fail(message);
      },
    };
  }

  async function sendDecisions(id, decisions, boxes) {
    const answer = await fetch(base + "/api/runs/" + path(id) + "/decisions", {
      method: "POST",
      headers: { "content-type": "application/json", ...guard },
      body: JSON.stringify({ decisions }),
    });
    if (!answer.ok) {
      const reply = await answer.json().catch(() => ({}));
      const error = reply.error || {};
      const box = error.call_id !== undefined ? boxes.get(error.call_id) : undefined;
      if (box) {  // that decision was refused (nothing was taken): decide it again
        delete decisions[error.call_id];
        box.unlock(error.message || "refused");
        return;
      }
      addNote("error", error.type ? error.type + ": " + error.message : "failed");
      return;
    }
    follow(id, lastSeq);
  }

  function follow(id, after) {
    runId = id;
    bubble = null;
    setBusy(true);
    setStatus("Waiting for the model…");
    if (!after) lastSeq = 0;
    const query = after ? "?after=" + after : "";
    source = new EventSource(base + "/api/runs/" + path(id) + "/stream" + query);
    const on = (kind, handler) =>
      source.addEventListener(kind, (event) => {
        if (event.lastEventId) lastSeq = Number(event.lastEventId);
        handler(JSON.parse(event.data));
      });
    on("model_call_started", () => { setStatus("Thinking…"); loadTimeline(id); });
    on("model_call_finished", () => loadTimeline(id));
    on("agent_text_delta", (e) => {
      if (!bubble) bubble = addMessage("assistant", "");
      bubble.textContent += e.data.text;
      setStatus("Answering…");
      scrollDown();
    });
    on("agent_tool_call", (e) => {
      bubble = null;
      addToolCall(e.data.id, e.data.name, e.data.input);
      setStatus("Running " + e.data.name + "…");
    });
    on("agent_tool_result", (e) => {
      setToolResult(e.data.id, e.data.output, e.data.is_error);
      loadTimeline(id);
    });
    on("agent_warning", (e) => addNote("warning", e.data.message));
    on("agent_paused", (e) => askDecisions(id, e.data.pending || []));
    on("agent_failed", (e) => {
      const error = e.data.error || {};
      addNote(e.data.cancelled ? "cancelled" : "error",
        e.data.cancelled ? "Cancelled." : (error.type || "Error") + ": " + (error.message || ""));
    });
    on("run_ended", (e) => {
      source.close();
      source = null;
      runId = null;
      setBusy(false);
      if (e.status === "paused") setStatus("Waiting for your decision.");
      else setStatus(e.status === "completed" ? "" : "The run ended " + e.status + ".");
      loadScopes();
      loadTimeline(id);
    });
    source.addEventListener("error", (event) => {
      // A message named "error" carries data; a lost connection does not (the browser
      // reconnects by itself, with Last-Event-ID, and nothing is lost or repeated).
      if (event.data) addNote("error", JSON.parse(event.data).error.message);
      else if (source && source.readyState === EventSource.CONNECTING) setStatus("Reconnecting…");
    });
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const text = input.value.trim();
    if (!text || runId) return;
    setBusy(true);
    const files = attach ? Array.from(attach.files) : [];
    let request;
    if (files.length) {
      // Files go as a multipart upload (the browser sets its boundary and the Origin).
      const upload = new FormData();
      upload.append("input", text);
      if (scope) upload.append("scope", scope);
      for (const file of files) upload.append("file", file, file.name);
      request = { method: "POST", headers: { ...guard }, body: upload };
    } else {
      const body = { input: text };
      if (scope) body.scope = scope;
      request = {
        method: "POST",
        headers: { "content-type": "application/json", ...guard },
        body: JSON.stringify(body),
      };
    }
    const answer = await fetch(base + "/api/agents/" + path(agent) + "/runs", request);
    const reply = await answer.json();
    if (!answer.ok) {
      setBusy(false);
      addNote("error", reply.error ? reply.error.type + ": " + reply.error.message : "failed");
      return;
    }
    input.value = "";
    addMessage("user", files.length ? text + " [" + files.map((f) => f.name).join(", ") + "]" : text);
    if (attach) attach.value = "";
    scope = reply.scope;
    showScope();
    follow(reply.run_id);
  });

  input.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey) {
      event.preventDefault();
      form.requestSubmit();
    }
  });

  cancelButton.addEventListener("click", async () => {
    if (!runId) return;
    setStatus("Cancelling…");
    await fetch(base + "/api/runs/" + path(runId) + "/cancel", { method: "POST", headers: guard });
  });

  newButton.addEventListener("click", () => {
    if (runId) return;
    scope = "";
    showScope();
    loadHistory();
    loadScopes();
    input.focus();
  });

  setBusy(false);
  loadHistory();
  loadScopes();
})();
