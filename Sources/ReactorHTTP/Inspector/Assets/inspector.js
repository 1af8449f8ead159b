// The inspector: one reactor instance, live. Opened as /inspector#<id>; the id stays in the
// fragment, so it never reaches a request line, a log or a Referer.
//
// The page follows GET /reactors/{id}/events (EventSource). Each `state` event asks
// GET /reactors/{id}/history?after=<newest version the history gave> for the versions it has not
// described yet (which action produced each, and when) and for the accepted actions; requests
// arriving while one is in flight are folded into one more.
//
// On a server that authenticates its callers, the requests carry the token of the page's Token
// field (auth.js). Without it the page says a token is needed; the history is an admin's, and a
// subject that is not one sees the live states without the actions that produced them.
"use strict";

const KEPT_VERSIONS = 256; // as many as the server keeps by default
const KEPT_ACTIONS = 256;
const RESUMABLE = new Set(["shutdown", "moved", "unavailable"]);

const $ = (id) => document.getElementById(id);
const ui = {
  type: $("instance-type"), id: $("instance-id"), connection: $("connection"),
  reconnect: $("reconnect"), remove: $("delete"), dialog: $("delete-dialog"),
  missing: $("missing"), unauthenticated: $("unauthenticated"), main: $("inspector"),
  stateCaption: $("state-caption"), tree: $("state-tree"),
  slider: $("version-slider"), older: $("older"), newer: $("newer"), follow: $("follow"),
  viewing: $("viewing"), historyRefused: $("history-refused"), base: $("base-select"), diffHeading: $("diff-heading"), diff: $("diff"),
  timeline: $("timeline"), log: $("actions"), logEmpty: $("log-empty"),
  form: $("send-form"), example: $("example"), actionJSON: $("action-json"), send: $("send"),
  sendResult: $("send-result"),
};

const model = {
  id: decodeURIComponent(window.location.hash.slice(1)),
  versions: [],          // {version, state, seq, at}, oldest first
  actions: new Map(),    // seq → {seq, action, at}
  errors: [],            // the `error` events' problems ({action: seq, detail, errorType, …})
  historyVersion: null,  // the newest version the history route has described
  lastEventVersion: null,
  reconcile: false,      // the stream reopened: the next history read says which kept versions are not the instance's
  viewed: null,          // the version on screen; null while following the latest
  base: "previous",      // what it is compared with: "previous" or a version number
  ended: null,           // the end reason once the stream has ended
  historyRefused: false, // the history route answered 401 or 403: it is not asked again
};
const collapsed = new Set(); // JSON pointers of the tree's closed nodes
let source = null;

// --- small helpers ------------------------------------------------------------------------

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) node.textContent = text;
  return node;
}

function json(value, limit = 160) {
  const text = value === undefined ? "–" : JSON.stringify(value);
  return text.length > limit ? `${text.slice(0, limit - 1)}…` : text;
}

function timeElement(at) {
  const node = element("time", "time");
  const date = at ? new Date(at) : null;
  if (!date || Number.isNaN(date.getTime())) {
    node.textContent = "time unknown";
    return node;
  }
  node.dateTime = at;
  node.title = at;
  const clock = date.toLocaleTimeString([], { hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" });
  node.textContent = `${clock}.${String(date.getMilliseconds()).padStart(3, "0")}`;
  return node;
}

const instancePath = (suffix = "") => `/reactors/${encodeURIComponent(model.id)}${suffix}`;

// --- JSON: pulses, pointers and the diff ---------------------------------------------------

const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
const isContainer = (value) => value !== null && typeof value === "object";
const isPulse = (value) => isObject(value) && Object.keys(value).length === 2
  && Object.hasOwn(value, "value") && Number.isInteger(value.count);
const pointer = (path, key) => `${path}/${String(key).replace(/~/g, "~0").replace(/\//g, "~1")}`;

// What turns `from` into `to`: {kind: "added" | "removed" | "changed", path, from, to} for each
// differing path (a JSON Pointer); objects are compared by key, arrays by index.
function diff(from, to, path = "", out = []) {
  if (Array.isArray(from) && Array.isArray(to)) {
    for (let index = 0; index < Math.max(from.length, to.length); index += 1) {
      const at = pointer(path, index);
      if (index >= from.length) out.push({ kind: "added", path: at, to: to[index] });
      else if (index >= to.length) out.push({ kind: "removed", path: at, from: from[index] });
      else diff(from[index], to[index], at, out);
    }
  } else if (isObject(from) && isObject(to)) {
    for (const key of Object.keys(from)) {
      if (!Object.hasOwn(to, key)) out.push({ kind: "removed", path: pointer(path, key), from: from[key] });
    }
    for (const key of Object.keys(to)) {
      const at = pointer(path, key);
      if (!Object.hasOwn(from, key)) out.push({ kind: "added", path: at, to: to[key] });
      else diff(from[key], to[key], at, out);
    }
  } else if (from !== to) {
    out.push({ kind: "changed", path, from, to });
  }
  return out;
}

// Path → mark for the tree: each difference's own kind, and "within" on its ancestors.
function marksOf(changes) {
  const marks = new Map();
  for (const change of changes) {
    const parts = change.path.split("/");
    for (let length = 1; length < parts.length; length += 1) {
      const ancestor = parts.slice(0, length).join("/");
      if (!marks.has(ancestor)) marks.set(ancestor, "within");
    }
    marks.set(change.path, change.kind);
  }
  return marks;
}

// --- the state tree ------------------------------------------------------------------------

function mark(node, kind) {
  if (!kind) return;
  node.classList.add(`mark-${kind}`);
  if (kind !== "within") node.title = kind;
}

function leaf(value, path, marks) {
  const type = value === null ? "null" : Array.isArray(value) ? "array" : typeof value;
  const node = element("span", `value t-${type}`, JSON.stringify(value));
  node.dataset.path = path;
  mark(node, marks.get(path));
  return node;
}

// One key and its value; a container is a <details> its reader can fold (the fold is kept).
function treeNode(key, value, path, marks) {
  const item = element("li", "node");
  const head = key === null ? [] : [element("span", "key", String(key)), ": "];
  let shown = value;
  let shownPath = path;
  let badge = null;
  if (isPulse(value)) {
    item.dataset.path = path;
    mark(item, marks.get(path));
    badge = element("span", "pulse", `pulse · count ${value.count}`);
    badge.dataset.path = pointer(path, "count");
    mark(badge, marks.get(badge.dataset.path));
    shown = value.value;
    shownPath = pointer(path, "value");
  }
  const size = isContainer(shown) ? Object.keys(shown).length : 0;
  if (size === 0) {
    item.append(...head, leaf(shown, shownPath, marks));
    if (badge) item.append(" ", badge);
    return item;
  }
  const details = element("details");
  details.open = !collapsed.has(shownPath);
  details.addEventListener("toggle", () => {
    if (details.open) collapsed.delete(shownPath); else collapsed.add(shownPath);
  });
  const summary = element("summary");
  summary.dataset.path = shownPath;
  mark(summary, marks.get(shownPath));
  summary.append(...head, element("span", "size", Array.isArray(shown) ? `[${size}]` : `{${size}}`));
  if (badge) summary.append(" ", badge);
  details.append(summary, children(shown, shownPath, marks));
  item.append(details);
  return item;
}

function children(value, path, marks) {
  const list = element("ul", "tree");
  for (const [key, child] of Object.entries(value)) list.append(treeNode(key, child, pointer(path, key), marks));
  return list;
}

// --- rendering -----------------------------------------------------------------------------

function viewedIndex() {
  const last = model.versions.length - 1;
  if (model.viewed === null) return last;
  const index = model.versions.findIndex((entry) => entry.version === model.viewed);
  return index < 0 ? last : index;
}

function baseEntry(targetIndex) {
  if (model.base === "previous") return model.versions[targetIndex - 1] ?? null;
  return model.versions.find((entry) => entry.version === model.base) ?? model.versions[targetIndex - 1] ?? null;
}

function producedBy(entry) {
  if (entry.seq === null || entry.seq === undefined) {
    return entry.version === 0 ? "initial state" : model.historyRefused ? "action not known" : "no action";
  }
  const action = model.actions.get(entry.seq);
  return action && action.action !== null ? `action #${entry.seq} ${json(action.action, 60)}` : `action #${entry.seq}`;
}

function renderState(target, changes) {
  if (!target) {
    ui.stateCaption.textContent = "";
    ui.tree.replaceChildren(element("p", "muted", "Waiting for the first state…"));
    return;
  }
  ui.stateCaption.textContent = `· version ${target.version} · ${producedBy(target)}`;
  const marks = marksOf(changes);
  ui.tree.replaceChildren(isContainer(target.state) && Object.keys(target.state).length > 0
    ? children(target.state, "", marks) : leaf(target.state, "", marks));
}

function renderDiff(base, target, changes) {
  ui.diffHeading.textContent = base ? `Changes from version ${base.version} to ${target.version}` : "Changes";
  if (!target) { ui.diff.replaceChildren(); return; }
  if (!base) { ui.diff.replaceChildren(element("li", "muted", "No earlier version kept to compare with.")); return; }
  if (changes.length === 0) { ui.diff.replaceChildren(element("li", "muted", "No differences.")); return; }
  ui.diff.replaceChildren(...changes.map((change) => {
    const item = element("li", `diff-${change.kind}`);
    item.dataset.path = change.path;
    item.append(element("span", "diff-kind", change.kind), " ", element("code", "diff-path", change.path || "(the whole state)"), " ");
    if (change.kind === "changed") item.append(element("code", null, json(change.from, 80)), " → ", element("code", null, json(change.to, 80)));
    else item.append(element("code", null, json(change.kind === "added" ? change.to : change.from, 80)));
    return item;
  }));
}

function renderTravel(index, target) {
  const count = model.versions.length;
  ui.slider.max = String(Math.max(count - 1, 0));
  ui.slider.value = String(Math.max(index, 0));
  ui.slider.disabled = count < 2;
  ui.slider.setAttribute("aria-valuetext", target ? `version ${target.version}` : "none");
  ui.older.disabled = index <= 0;
  ui.newer.disabled = index >= count - 1;
  ui.follow.setAttribute("aria-pressed", String(model.viewed === null));
  ui.viewing.textContent = target
    ? `Viewing version ${target.version} (${index + 1} of ${count} kept)${model.viewed === null ? ", following live" : ""}.`
    : "";

  // Rebuilt only when the kept versions change, so an open list is not closed under the reader.
  const kept = model.versions.map((entry) => entry.version).join(",");
  if (ui.base.dataset.kept !== kept) {
    const options = [new Option("the previous kept version", "previous")];
    for (const entry of model.versions) options.push(new Option(`version ${entry.version}`, String(entry.version)));
    ui.base.replaceChildren(...options);
    ui.base.dataset.kept = kept;
  }
  ui.base.value = String(model.base);
  if (ui.base.value !== String(model.base)) ui.base.value = "previous";
}

function renderTimeline(target) {
  const focused = document.activeElement?.closest?.("#timeline li")?.dataset.version;
  const items = model.versions.slice().reverse().map((entry) => {
    const item = element("li", "timeline-entry");
    item.dataset.version = String(entry.version);
    if (entry.seq !== null && entry.seq !== undefined) item.dataset.seq = String(entry.seq);
    const button = element("button", "version-button", `v${entry.version}`);
    button.type = "button";
    button.setAttribute("aria-label", `Show version ${entry.version}`);
    if (entry === target) { button.setAttribute("aria-current", "true"); item.classList.add("selected"); }
    button.addEventListener("click", () => view(entry.version));
    item.append(button, " ", element("span", "produced", producedBy(entry)), " ", timeElement(entry.at));
    return item;
  });
  ui.timeline.replaceChildren(...items);
  if (focused !== undefined) ui.timeline.querySelector(`li[data-version="${focused}"] button`)?.focus();
}

function errorNote(error) {
  const type = error.errorType ? ` (${error.errorType})` : "";
  return element("p", "error-note", `${error.title || "Error"}: ${error.detail || ""}${type}`);
}

// Newest first; an action whose mutations failed (an `error` event naming its seq) is marked.
function renderLog() {
  const entries = new Map(model.actions);
  const loose = [];
  for (const error of model.errors) {
    if (!Number.isInteger(error.action)) loose.push(error);
    else if (!entries.has(error.action)) entries.set(error.action, { seq: error.action, action: null, at: null });
  }
  const items = [...entries.values()].sort((a, b) => b.seq - a.seq).map((entry) => {
    const item = element("li", "log-entry");
    item.dataset.seq = String(entry.seq);
    item.append(element("span", "seq", `#${entry.seq}`), " ",
      element("code", "action-json", entry.action === null ? "(action unknown)" : json(entry.action)), " ",
      timeElement(entry.at));
    const produced = model.versions.filter((version) => version.seq === entry.seq).map((version) => version.version);
    if (produced.length > 0) {
      const range = produced.length === 1 ? `version ${produced[0]}` : `versions ${produced[0]}–${produced.at(-1)}`;
      item.append(" ", element("span", "produced muted", `→ ${range}`));
    }
    const errors = model.errors.filter((error) => error.action === entry.seq);
    if (errors.length > 0) {
      item.classList.add("failed");
      item.prepend(element("span", "failed-badge", "failed"), " ");
      item.append(...errors.map(errorNote));
    }
    return item;
  });
  for (const error of loose) {
    const item = element("li", "log-entry failed");
    item.append(element("span", "failed-badge", "failed"), " ", element("span", "seq", "action unknown"), errorNote(error));
    items.unshift(item);
  }
  ui.log.replaceChildren(...items);
  ui.logEmpty.hidden = items.length > 0;
}

function render() {
  const index = viewedIndex();
  const target = model.versions[index] ?? null;
  const base = target ? baseEntry(index) : null;
  const changes = base ? diff(base.state, target.state) : [];
  renderState(target, changes);
  renderDiff(base, target, changes);
  renderTravel(index, target);
  renderTimeline(target);
  renderLog();
}

// --- time travel ---------------------------------------------------------------------------

function view(version) {
  const last = model.versions[model.versions.length - 1];
  model.viewed = last && last.version === version ? null : version;
  render();
}

function step(by) {
  const entry = model.versions[viewedIndex() + by];
  if (entry) view(entry.version);
}

ui.slider.addEventListener("input", () => {
  const entry = model.versions[Number(ui.slider.value)];
  if (entry) view(entry.version);
});
ui.older.addEventListener("click", () => step(-1));
ui.newer.addEventListener("click", () => step(1));
ui.follow.addEventListener("click", () => { model.viewed = null; render(); });
ui.base.addEventListener("change", () => {
  model.base = ui.base.value === "previous" ? "previous" : Number(ui.base.value);
  render();
});

// --- the model: stream events and the history route ----------------------------------------

function keepVersion(entry) {
  const index = model.versions.findIndex((known) => known.version >= entry.version);
  if (index < 0) model.versions.push(entry);
  else if (model.versions[index].version === entry.version) model.versions[index] = { ...model.versions[index], ...entry };
  else model.versions.splice(index, 0, entry);
  if (model.versions.length > KEPT_VERSIONS) model.versions.splice(0, model.versions.length - KEPT_VERSIONS);
}

function mergeHistory(history) {
  if (history.type) showType(history.type);
  if (model.reconcile) reconcile(history.versions ?? []);
  for (const entry of history.versions ?? []) {
    keepVersion({ version: entry.version, state: entry.state, seq: entry.seq ?? null, at: entry.at ?? null });
  }
  for (const entry of history.actions ?? []) {
    model.actions.set(entry.seq, { seq: entry.seq, action: entry.action ?? null, at: entry.at ?? null });
  }
  const seqs = [...model.actions.keys()].sort((a, b) => a - b);
  for (const seq of seqs.slice(0, Math.max(seqs.length - KEPT_ACTIONS, 0))) model.actions.delete(seq);
  if (Number.isInteger(history.version)) model.historyVersion = Math.max(model.historyVersion ?? -1, history.version);
}

// After the stream reopened: the instance may have skipped versions this page saw (a crash lost
// them, or a restored backup took the instance back); the history lists every version between
// its oldest and newest, so a kept version in that range it does not list is not the instance's.
function reconcile(versions) {
  model.reconcile = false;
  if (versions.length === 0) return;
  const listed = new Set(versions.map((entry) => entry.version));
  const oldest = Math.min(...listed);
  const newest = Math.max(...listed);
  const gone = (version) => version >= oldest && version <= newest && !listed.has(version);
  model.versions = model.versions.filter((entry) => !gone(entry.version));
  if (model.viewed !== null && gone(model.viewed)) model.viewed = null;
}

let historyInFlight = false;
let historyAgain = false;

async function refreshHistory() {
  if (model.historyRefused) return;
  if (historyInFlight) { historyAgain = true; return; }
  historyInFlight = true;
  try {
    do {
      historyAgain = false;
      const after = model.historyVersion === null || model.reconcile ? "" : `?after=${model.historyVersion}`;
      const response = await auth.fetch(instancePath(`/history${after}`), { headers: { Accept: "application/json" } });
      if (response.status === 401 || response.status === 403) {
        refuseHistory(response, await response.json().catch(() => null));
        break;
      }
      if (!response.ok) break; // gone: the stream's end event says why
      mergeHistory(await response.json());
      render();
    } while (historyAgain);
  } catch {
    // the next state event asks again
  } finally {
    historyInFlight = false;
  }
}

// The history is an admin's (on a server that authenticates its callers): say so, once.
function refuseHistory(response, problem) {
  model.historyRefused = true;
  const reason = response.status === 401 ? auth.askForToken(problem)
    : `${problem?.title || "Forbidden"} (${response.status}): ${problem?.detail || ""}`;
  ui.historyRefused.textContent = `Without the history (an admin's route), the kept versions show no actions. ${reason}`;
  ui.historyRefused.hidden = false;
}

// A 401: the page cannot follow the instance until a token is given (which reloads it).
function showUnauthenticated(problem, text = auth.askForToken(problem)) {
  if (source) { source.close(); source = null; }
  ui.unauthenticated.textContent = text;
  ui.unauthenticated.hidden = false;
  setConnection("ended", "needs a token");
  ui.send.disabled = true;
  ui.remove.disabled = true;
}

function setConnection(state, text) {
  ui.connection.dataset.state = state;
  ui.connection.textContent = text;
}

function setEnded(reason) {
  model.ended = reason;
  if (source) { source.close(); source = null; }
  setConnection("ended", `ended: ${reason}`);
  ui.send.disabled = true;
  ui.remove.disabled = true;
  ui.reconnect.hidden = !RESUMABLE.has(reason);
}

function connect() {
  const resume = model.lastEventVersion === null ? "" : `?lastEventId=${model.lastEventVersion}`;
  source = new EventSource(auth.eventSourceURL(instancePath(`/events${resume}`)));
  const stream = source;
  setConnection("connecting", "connecting");
  stream.addEventListener("open", () => {
    setConnection("live", "live");
    if (model.lastEventVersion === null) return;
    // Reopened: read the whole history again, and check what this page kept against it.
    model.reconcile = true;
    model.historyVersion = null;
    refreshHistory();
  });
  stream.addEventListener("state", (event) => {
    const version = Number(event.lastEventId);
    model.lastEventVersion = version;
    keepVersion({ version, state: JSON.parse(event.data), ...(model.versions.some((entry) => entry.version === version) ? {} : { seq: null, at: null }) });
    render();
    refreshHistory();
  });
  stream.addEventListener("rewound", (event) => {
    // The instance went back to an earlier version (a backup restored in place of a lost
    // store): what this page kept after it is not the instance's. The state event that follows
    // and a full history read bring the page back in line.
    const { version } = JSON.parse(event.data);
    model.versions = model.versions.filter((entry) => entry.version <= version);
    model.actions.clear();
    model.errors = [];
    model.historyVersion = null;
    if (model.viewed !== null && model.viewed > version) model.viewed = null;
    render();
  });
  stream.addEventListener("end", (event) => setEnded(JSON.parse(event.data).reason));
  // `error` is both the server's event (a failed mutation, with data) and EventSource's own.
  stream.addEventListener("error", (event) => {
    if (event instanceof MessageEvent && typeof event.data === "string") {
      model.errors.push(JSON.parse(event.data));
      render();
      refreshHistory();
    } else if (stream.readyState === EventSource.CONNECTING) {
      setConnection("reconnecting", `reconnecting (Last-Event-ID ${model.lastEventVersion ?? "none"})`);
    } else if (stream === source) {
      checkGone();
    }
  });
}

// The stream was refused or closed without an end event: tell "gone" and "needs a token" from
// "unreachable".
async function checkGone() {
  try {
    const response = await auth.fetch(instancePath(), { headers: { Accept: "application/json" } });
    if (response.status === 404) { setEnded("not found"); return; }
    if (response.status === 401) { showUnauthenticated(await response.json().catch(() => null)); return; }
    if (response.ok && auth.token()) {
      const refusal = await streamRefusal();
      if (refusal) {
        showUnauthenticated(refusal, "The server takes the token in a header but not on the event stream, which "
          + "cannot send one: start it with --auth-query-token, or sign in with the cookie --auth-cookie names.");
        return;
      }
    }
  } catch {
    // unreachable: offered a reconnect below
  }
  if (source) { source.close(); source = null; }
  setConnection("disconnected", "disconnected");
  ui.reconnect.hidden = false;
}

// The problem the event stream answers when asked as EventSource asks (the token in the query,
// no Authorization header), if it is a 401; null otherwise.
async function streamRefusal() {
  const controller = new AbortController();
  try {
    const response = await fetch(auth.eventSourceURL(instancePath("/events")), {
      headers: { Accept: "text/event-stream" }, signal: controller.signal,
    });
    if (response.status !== 401) return null;
    return (await response.json().catch(() => null)) ?? {};
  } catch {
    return null;
  } finally {
    controller.abort();
  }
}

ui.reconnect.addEventListener("click", () => {
  model.ended = null;
  ui.reconnect.hidden = true;
  ui.send.disabled = false;
  ui.remove.disabled = false;
  connect();
});

// --- sending actions -----------------------------------------------------------------------

function showType(type) {
  if (ui.type.textContent === type) return;
  ui.type.textContent = type;
  document.title = `Inspector · ${type} · ReactorServer`;
  loadExamples(type);
}

async function loadExamples(type) {
  try {
    const response = await auth.fetch("/types", { headers: { Accept: "application/json" } });
    const info = (await response.json()).types.find((candidate) => candidate.name === type);
    if (!info) return;
    const options = [new Option("(hand-written)", "")];
    for (const action of info.exampleActions) options.push(new Option(JSON.stringify(action), JSON.stringify(action)));
    ui.example.replaceChildren(...options);
  } catch {
    // the form still takes hand-written JSON
  }
}

ui.example.addEventListener("change", () => {
  if (ui.example.value) ui.actionJSON.value = ui.example.value;
});
ui.actionJSON.addEventListener("input", () => {
  if (ui.example.value && ui.actionJSON.value !== ui.example.value) ui.example.value = "";
});

function showProblem(problem, response) {
  const box = element("div", "problem");
  box.append(element("p", "problem-heading", `Refused (${problem.status ?? response.status})`));
  if (response.status === 401) box.append(element("p", "problem-token", auth.askForToken(problem)));
  const list = element("dl");
  for (const [name, value] of [["title", problem.title], ["status", problem.status ?? response.status],
    ["detail", problem.detail], ["type", problem.type]]) {
    if (value === undefined) continue;
    const term = element("dt", null, name);
    const description = element("dd", `problem-${name}`, String(value));
    list.append(term, description);
  }
  box.append(list);
  ui.sendResult.replaceChildren(box);
}

ui.form.addEventListener("submit", async (event) => {
  event.preventDefault();
  ui.send.disabled = true;
  try {
    const response = await auth.fetch(instancePath("/actions"), {
      method: "POST", headers: { "Content-Type": "application/json" }, body: ui.actionJSON.value,
    });
    const body = await response.json().catch(() => ({}));
    if (response.ok) {
      ui.sendResult.replaceChildren(element("p", "accepted", `Accepted as action #${body.seq}.`));
      refreshHistory();
    } else {
      showProblem(body, response);
    }
  } catch (error) {
    ui.sendResult.replaceChildren(element("p", "problem", `Not sent: ${error.message}`));
  } finally {
    ui.send.disabled = model.ended !== null;
  }
});

// --- deleting ------------------------------------------------------------------------------

ui.remove.addEventListener("click", () => ui.dialog.showModal());
ui.dialog.addEventListener("close", async () => {
  if (ui.dialog.returnValue !== "delete") return;
  ui.dialog.returnValue = "";
  try {
    const response = await auth.fetch(instancePath(), { method: "DELETE" });
    if (response.status === 204 || response.status === 404) {
      // A live stream ends with `deleted` itself; otherwise say so here.
      if (!source || source.readyState !== EventSource.OPEN) setEnded(response.status === 204 ? "deleted" : "not found");
    } else if (response.status === 401) {
      showUnauthenticated(await response.json().catch(() => null));
    } else {
      const problem = await response.json().catch(() => null);
      const detail = problem?.detail ? `, ${problem.detail}` : "";
      setConnection(ui.connection.dataset.state, `${ui.connection.textContent} (delete refused: ${response.status}${detail})`);
    }
  } catch (error) {
    setConnection(ui.connection.dataset.state, `${ui.connection.textContent} (delete failed: ${error.message})`);
  }
});

// --- start ---------------------------------------------------------------------------------

window.addEventListener("hashchange", () => window.location.reload());
// Another token: everything again with it.
auth.onChange(() => window.location.reload());

async function start() {
  if (!model.id) {
    ui.missing.hidden = false;
    ui.main.hidden = true;
    ui.remove.disabled = true;
    setConnection("ended", "no instance");
    return;
  }
  ui.id.textContent = model.id;
  render();
  try {
    const response = await auth.fetch(instancePath(), { headers: { Accept: "application/json" } });
    if (response.status === 404) { setEnded("not found"); return; }
    if (response.status === 401) { showUnauthenticated(await response.json().catch(() => null)); return; }
    if (response.ok) showType((await response.json()).type);
  } catch {
    // the stream reports what is wrong
  }
  connect();
  refreshHistory();
}

start();
