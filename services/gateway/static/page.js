// Corral's page, live. The node, actor and group tables are drawn here from the JSON API and filtered, grouped
// and paged in the browser; the summary, a node's detail, pending work and virtual clusters are server-rendered
// fragments. Each event of the stream names what it changed: only the nodes it names are fetched again, and
// only the fragments it changes, batched at most every 400 ms. The taint forms go through proposal 002's calls
// with the token kept in sessionStorage (never a cookie). Without this script the page and its forms still work.
(() => {
  "use strict";
  const THROTTLE_MS = 400;
  const FILTER_MS = 120;
  const PAGE_ROWS = 50;
  const MANY_NODES = 200; // more nodes named at once than this: fetch them all again
  const RESOURCE_COLUMNS = 4;
  const TOKEN_KEY = "corral-token";
  const FRAGMENTS = ["summary", "pending", "vclusters"];
  const body = document.body;
  body.dataset.scriptStart = String(Math.round(performance.now())); // ms from navigation start
  const status = document.getElementById("status");
  const live = document.getElementById("live");
  const zoneLabel = body.dataset.zoneLabel || "";
  document.documentElement.classList.add("js");

  // Quantities as the CLI writes them (services/core/amounts.py's format_quantity): 4Gi, 2000, 2.5M, 500m, 1.5.
  const SUFFIXES = {
    M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
    Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
  };
  const BINARY_FIRST = ["Ei", "Pi", "Ti", "Gi", "Mi", "Ki"];
  const LARGE_DECIMAL_FIRST = ["E", "P", "T", "G", "M"];

  function decimals(value, places) { // at most `places` decimals, trailing zeros dropped, no exponent
    const text = value.toFixed(places);
    return text.includes(".") ? text.replace(/0+$/, "").replace(/\.$/, "") : text;
  }

  function formatQuantity(value, binary) {
    if (!Number.isFinite(value)) return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
    if (value < 0) return "-" + formatQuantity(-value, binary);
    for (const suffix of binary ? BINARY_FIRST : LARGE_DECIMAL_FIRST) {
      if (value >= SUFFIXES[suffix]) return decimals(value / SUFFIXES[suffix], binary ? 2 : 3) + suffix;
    }
    if (value > 0 && value < 1 && !binary) return decimals(value * 1000, 3) + "m";
    return decimals(value, 3) || "0";
  }

  function formatAmount(name, value) {
    return formatQuantity(value, name.toLowerCase().includes("memory"));
  }
  window.Corral = Object.freeze({ formatAmount, formatQuantity });

  function say(text, isError) {
    status.textContent = text;
    status.hidden = !text;
    status.classList.toggle("error", Boolean(isError));
  }

  function el(tag, className, ...children) { // an element with text children (never parsed as HTML)
    const made = document.createElement(tag);
    if (className) made.className = className;
    for (const child of children) made.append(child instanceof Node ? child : String(child));
    return made;
  }

  function nodeLink(id) {
    const link = el("a", "node-link", id);
    link.href = "/?node=" + encodeURIComponent(id) + "#detail";
    link.dataset.node = id;
    return link;
  }

  function stateOf(node) {
    return node.state === "alive" ? "ready" : node.state;
  }

  function taintText(taint) {
    return taint.value ? `${taint.key}=${taint.value}:${taint.effect}` : `${taint.key}:${taint.effect}`;
  }

  async function getJson(url) {
    const answer = await fetch(url, { headers: { Accept: "application/json" } });
    if (!answer.ok) {
      const refused = await answer.json().catch(() => ({ error: answer.statusText }));
      throw new Error(`${answer.status}: ${refused.error || answer.statusText}`);
    }
    return answer.json();
  }

  // The token, for the changes.
  const login = document.getElementById("login");
  if (login) {
    const input = document.getElementById("token");
    input.value = sessionStorage.getItem(TOKEN_KEY) || "";
    login.hidden = false;
    login.addEventListener("submit", (event) => {
      event.preventDefault();
      sessionStorage.setItem(TOKEN_KEY, input.value.trim());
      say("Token kept for this tab.", false);
    });
  }

  function headers() {
    const sent = { "Content-Type": "application/json", Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) sent.Authorization = "Bearer " + token;
    return sent;
  }

  // A paged table: a header, the rows of one page, and a pager under it.
  class Table {
    constructor(section, columns) {
      this.target = document.querySelector(`[data-section="${section}"]`);
      this.columns = columns;
      this.page = 0;
    }

    show(rows, counter, counted) { // rows: [cells] or {group: text}; counted: how many items the rows hold
      const pages = Math.max(1, Math.ceil(rows.length / PAGE_ROWS));
      this.page = Math.min(this.page, pages - 1);
      const shown = rows.slice(this.page * PAGE_ROWS, (this.page + 1) * PAGE_ROWS);
      const head = el("tr", "", ...this.columns.map((name) => el("th", "", name)));
      const lines = shown.map((row) => {
        if (row.group !== undefined) {
          const cell = el("th", "", row.group);
          cell.colSpan = this.columns.length;
          return el("tr", "group", cell);
        }
        const line = el("tr", row.className || "", ...row.cells.map((cell) => el("td", "", cell)));
        if (row.id !== undefined) line.dataset.id = row.id;
        return line;
      });
      const table = el("table", "listing", el("thead", "", head), el("tbody", "", ...lines));
      const pager = el("div", "pager");
      if (pages > 1) {
        const back = el("button", "", "‹ previous");
        const next = el("button", "", "next ›");
        back.type = next.type = "button";
        back.disabled = this.page === 0;
        next.disabled = this.page === pages - 1;
        back.addEventListener("click", () => { this.page -= 1; render(); });
        next.addEventListener("click", () => { this.page += 1; render(); });
        pager.append(back, el("span", "muted", `page ${this.page + 1} of ${pages}`), next);
      }
      this.target.replaceChildren(table, pager);
      counter.textContent = counted;
    }
  }

  // What the page knows: the live nodes (by id), the actors, the groups.
  const byName = new Intl.Collator(undefined, { numeric: true }).compare; // n2 before n10
  const nodes = new Map();
  let actors = [];
  let groups = {};
  const actorNodes = new Map(); // actor id -> node id, from the listing and from the events
  let selectorIds = null; // the ids the label selector matches (null: no selector)
  let selected = body.dataset.node || "";
  let loaded = false;

  const nodeTable = new Table("nodes", []);
  const actorTable = new Table("actors", ["actor", "namespace", "status", "node", "labels", "restarts"]);
  const groupTable = new Table("groups", ["group", "bundles", "nodes"]);
  const tools = (id) => document.getElementById(id);

  async function loadNodes(listed) { // the nodes the page came with, else asked for now
    listed = listed || (await getJson("/api/v1/nodes"));
    nodes.clear();
    for (const node of listed) nodes.set(node.node_id, node);
  }

  async function loadSome(ids) {
    const query = ids.map((id) => "id=" + encodeURIComponent(id)).join("&");
    const found = await getJson("/ui/data/nodes?" + query);
    ids.forEach((id) => nodes.delete(id)); // an id not answered: the node is gone
    for (const node of found) nodes.set(node.node_id, node);
  }

  async function loadActors() {
    actors = await getJson("/api/v1/actors");
    for (const actor of actors) if (actor.node_id) actorNodes.set(actor.actor_id, actor.node_id);
  }

  async function loadGroups() {
    groups = await getJson("/api/v1/placement-groups");
  }

  let appliedSelector = "";
  async function applySelector() {
    const text = tools("node-selector").value.trim();
    appliedSelector = text;
    if (!text) {
      selectorIds = null;
      tools("node-selector").classList.remove("invalid");
      return;
    }
    try {
      const matched = await getJson("/api/v1/nodes?selector=" + encodeURIComponent(text));
      selectorIds = new Set(matched.map((node) => node.node_id));
      tools("node-selector").classList.remove("invalid");
      say("", false);
    } catch (error) {
      selectorIds = null;
      tools("node-selector").classList.add("invalid");
      say(`Selector ${text}: ${error.message}`, true);
    }
  }

  function resourceKinds(listed) { // the most common resource kinds, CPU and memory first
    const seen = new Map();
    for (const node of listed) for (const name of Object.keys(node.resources)) seen.set(name, (seen.get(name) || 0) + 1);
    const rank = (name) => (name === "CPU" ? 0 : name === "memory" ? 1 : name === "GPU" ? 2 : 3);
    return [...seen.keys()]
      .sort((a, b) => rank(a) - rank(b) || seen.get(b) - seen.get(a) || a.localeCompare(b))
      .slice(0, RESOURCE_COLUMNS);
  }

  function fillOptions(select, values, blank) {
    const wanted = [blank, ...values];
    const have = [...select.options].map((option) => option.textContent);
    if (have.join("\n") === wanted.join("\n")) return;
    const chosen = select.value;
    select.replaceChildren(...wanted.map((value, index) => {
      const option = el("option", "", value);
      option.value = index === 0 ? "" : value;
      return option;
    }));
    select.value = values.includes(chosen) ? chosen : "";
  }

  function matchesSearch(node, text) {
    if (!text) return true;
    if (node.node_id.toLowerCase().includes(text) || node.address.toLowerCase().includes(text)) return true;
    if (Object.entries(node.labels).some(([key, value]) => `${key}=${value}`.toLowerCase().includes(text))) return true;
    return node.taints.some((taint) => taintText(taint).toLowerCase().includes(text));
  }

  function renderNodes() {
    const all = [...nodes.values()];
    const labelKeys = [...new Set(all.flatMap((node) => Object.keys(node.labels)))].sort();
    const zones = [...new Set(all.map((node) => node.labels[zoneLabel]).filter(Boolean))].sort();
    fillOptions(tools("node-zone"), zones, "any zone");
    fillOptions(tools("node-group"), labelKeys, "no grouping");
    const search = tools("node-search").value.trim().toLowerCase();
    const taint = tools("node-taint").value.trim().toLowerCase();
    const state = tools("node-state").value;
    const zone = tools("node-zone").value;
    const groupBy = tools("node-group").value;
    const shown = all.filter((node) =>
      (!selectorIds || selectorIds.has(node.node_id)) &&
      (!state || stateOf(node) === state) &&
      (!zone || node.labels[zoneLabel] === zone) &&
      (!taint || node.taints.some((one) => taintText(one).toLowerCase().includes(taint))) &&
      matchesSearch(node, search));
    const groupOf = (node) => (groupBy ? node.labels[groupBy] ?? "(none)" : "");
    shown.sort((a, b) => (groupBy ? byName(groupOf(a), groupOf(b)) : 0) || byName(a.node_id, b.node_id));
    const kinds = resourceKinds(all);
    nodeTable.columns = ["node", "state", "zone", ...kinds, "labels", "taints", "actors"];
    const sizes = new Map();
    shown.forEach((node) => sizes.set(groupOf(node), (sizes.get(groupOf(node)) || 0) + 1));
    const rows = [];
    let group = null;
    for (const node of shown) {
      if (groupBy && groupOf(node) !== group) {
        group = groupOf(node);
        rows.push({ group: `${groupBy}=${group} (${sizes.get(group)} nodes)` });
      }
      const usage = kinds.map((name) => {
        if (!(name in node.resources)) return "";
        const total = node.resources[name];
        const used = Math.max(total - (node.available[name] ?? 0), 0);
        return `${formatAmount(name, used)} / ${formatAmount(name, total)}`;
      });
      const user = Object.entries(node.labels).filter(([key]) => !key.startsWith("corral.io/"));
      rows.push({
        id: node.node_id,
        className: "node-row" + (node.node_id === selected ? " selected" : ""),
        cells: [
          nodeLink(node.node_id),
          el("span", "state " + stateOf(node), stateOf(node)),
          node.labels[zoneLabel] || "",
          ...usage,
          user.map(([key, value]) => `${key}=${value}`).join(" "),
          node.taints.map(taintText).join(" "),
          node.actors,
        ],
      });
    }
    const filtered = shown.length === all.length ? `${all.length} nodes` : `${shown.length} of ${all.length} nodes`;
    nodeTable.show(rows, tools("node-count"), filtered);
  }

  function renderActors() {
    const search = tools("actor-search").value.trim().toLowerCase();
    const shown = actors.filter((actor) => !search || [
      actor.actor_id, actor.namespace, actor.status, actor.node_id || "",
      ...Object.entries(actor.labels).map(([key, value]) => `${key}=${value}`),
    ].some((text) => text.toLowerCase().includes(search)));
    const rows = shown.map((actor) => ({
      cells: [
        actor.actor_id, actor.namespace, actor.status, actor.node_id ? nodeLink(actor.node_id) : "",
        Object.entries(actor.labels).map(([key, value]) => `${key}=${value}`).join(" "), actor.restarts,
      ],
    }));
    const counted = shown.length === actors.length ? `${actors.length} actors` : `${shown.length} of ${actors.length}`;
    actorTable.show(rows, tools("actor-count"), counted);
  }

  function renderGroups() {
    const search = tools("group-search").value.trim().toLowerCase();
    const all = Object.entries(groups).sort(([a], [b]) => byName(a, b));
    const shown = all.filter(([id, where]) => !search || [id, ...where].some((text) => text.toLowerCase().includes(search)));
    const rows = shown.map(([id, where]) => ({ cells: [id, where.length, [...new Set(where)].join(" ")] }));
    const counted = shown.length === all.length ? `${all.length} groups` : `${shown.length} of ${all.length}`;
    groupTable.show(rows, tools("group-count"), counted);
  }

  let drawing = null;
  function render() { // at most once a frame
    if (drawing !== null || !loaded) return;
    drawing = requestAnimationFrame(() => {
      drawing = null;
      renderNodes();
      renderActors();
      renderGroups();
    });
  }

  // The server-rendered fragments: the summary, pending work, virtual clusters, and the node in detail.
  const asked = {};
  async function refreshFragment(name, url) {
    const target = document.querySelector(`[data-section="${name}"]`);
    if (!target) return;
    const typing = target.contains(document.activeElement) && document.activeElement.matches("input, select");
    if (typing && document.activeElement.value) {
      dirtySections.add(name); // do not wipe what is being typed: try again later
      schedule();
      return;
    }
    const turn = (asked[name] = (asked[name] || 0) + 1);
    try {
      const answer = await fetch(url, { headers: { Accept: "text/html" } });
      if (!answer.ok) throw new Error(`${answer.status} ${answer.statusText}`);
      const html = await answer.text();
      if (turn === asked[name]) target.innerHTML = html;
    } catch (error) {
      say(`Could not refresh ${name}: ${error.message}`, true);
    }
  }

  function refreshDetail() {
    return refreshFragment("detail", "/ui/detail?node=" + encodeURIComponent(selected));
  }

  function select(id) {
    selected = id;
    history.replaceState(null, "", "/?node=" + encodeURIComponent(id) + "#detail");
    document.getElementById("detail").scrollIntoView({ block: "nearest" });
    render();
    return refreshDetail();
  }

  // The events: which nodes and sections each changed, fetched again in one batch at most every THROTTLE_MS.
  const dirtyNodes = new Set();
  const dirtySections = new Set();
  let everyNode = false;
  let timer = null;
  let flushing = false;

  function schedule() {
    if (timer === null && !flushing) timer = setTimeout(flush, THROTTLE_MS);
  }

  function nodesNamed(kind, data) { // the node ids an event changed; null when it does not say
    if (kind.startsWith("Virtual")) return null;
    const ids = [];
    if (typeof data.node_id === "string" && data.node_id) ids.push(data.node_id);
    if (Array.isArray(data.bundle_nodes)) ids.push(...data.bundle_nodes);
    if (Array.isArray(data.resized) && data.resized.length) return null;
    if (kind === "ActorPlaced") actorNodes.set(data.actor_id, data.node_id);
    if (kind === "ActorRemoved") {
      if (!actorNodes.has(data.actor_id)) return null;
      ids.push(actorNodes.get(data.actor_id));
      actorNodes.delete(data.actor_id);
    }
    if (kind.startsWith("PlacementGroup") && kind !== "PlacementGroupPlaced" && data.pg_id) {
      if (kind !== "PlacementGroupSubmitted" && kind !== "PlacementGroupPending") {
        if (!(data.pg_id in groups)) return null;
        ids.push(...groups[data.pg_id]);
      }
    }
    return ids;
  }

  function onEvent(kind, names, message) {
    let data = {};
    try {
      data = JSON.parse(message.data);
    } catch {
      everyNode = true;
    }
    if (names.includes("nodes")) {
      const ids = nodesNamed(kind, data);
      if (ids === null) everyNode = true;
      else ids.forEach((id) => dirtyNodes.add(id));
    }
    names.filter((name) => name !== "nodes").forEach((name) => dirtySections.add(name));
    schedule();
  }

  async function flush() {
    timer = null;
    flushing = true;
    const ids = [...dirtyNodes];
    const all = everyNode || ids.length > MANY_NODES;
    const sections = new Set(dirtySections);
    dirtyNodes.clear();
    dirtySections.clear();
    everyNode = false;
    const work = [];
    if (all) work.push(loadNodes(null));
    else if (ids.length) work.push(loadSome(ids));
    if (sections.has("actors")) work.push(loadActors());
    if (sections.has("groups")) work.push(loadGroups());
    FRAGMENTS.filter((name) => sections.has(name)).forEach((name) => work.push(refreshFragment(name, "/ui/" + name)));
    if (selected && (all || ids.includes(selected))) work.push(refreshDetail());
    try {
      await Promise.all(work);
      if (tools("node-selector").value.trim() && (all || ids.length)) await applySelector();
    } catch (error) {
      say(`Could not refresh: ${error.message}`, true);
    } finally {
      flushing = false;
      render();
      if (dirtyNodes.size || dirtySections.size || everyNode) schedule();
    }
  }

  function listen() {
    const kinds = JSON.parse(body.dataset.events || "{}");
    const source = new EventSource("/api/v1/events?since=" + encodeURIComponent(body.dataset.since || "1"));
    for (const [kind, names] of Object.entries(kinds)) {
      source.addEventListener(kind, (message) => onEvent(kind, names, message));
    }
    source.addEventListener("open", () => {
      live.textContent = "live";
      live.className = "live";
    });
    source.addEventListener("error", () => {
      live.textContent = "reconnecting…";
      live.className = "muted";
    });
  }

  // The filters: the selector asks the gateway (its own syntax), the others filter what the page holds.
  let filterTimer = null;
  function filterSoon() {
    clearTimeout(filterTimer);
    filterTimer = setTimeout(async () => {
      if (tools("node-selector").value.trim() !== appliedSelector) await applySelector();
      nodeTable.page = actorTable.page = groupTable.page = 0;
      render();
    }, FILTER_MS);
  }
  for (const form of ["node-tools", "actor-tools", "group-tools"]) {
    tools(form).hidden = false;
    tools(form).addEventListener("submit", (event) => event.preventDefault());
    tools(form).addEventListener("input", filterSoon);
    tools(form).addEventListener("change", filterSoon);
  }

  document.addEventListener("click", (event) => {
    const link = event.target.closest("a.node-link");
    if (!link || event.ctrlKey || event.metaKey || event.shiftKey) return;
    event.preventDefault();
    select(link.dataset.node);
  });

  document.addEventListener("submit", async (event) => {
    const form = event.target;
    if (!form.matches("form.add-taint, form.taint")) return;
    event.preventDefault();
    const data = new FormData(form);
    const node = data.get("node_id");
    const key = String(data.get("key")).trim();
    const adding = form.matches(".add-taint");
    const value = adding ? String(data.get("value")).trim() : "";
    const change = { [key]: `${value}:${data.get("effect")}` };
    let answer;
    try {
      answer = await fetch("/nodes/taints/" + encodeURIComponent(node), {
        method: adding ? "POST" : "DELETE",
        headers: headers(),
        body: JSON.stringify(change),
      });
    } catch (error) {
      say(`The gateway did not answer: ${error.message}`, true);
      return;
    }
    if (answer.ok) {
      say(`Taint ${key} ${adding ? "added to" : "removed from"} ${node}.`, false);
      if (adding) form.reset();
      dirtyNodes.add(node);
      schedule();
    } else {
      const refused = await answer.json().catch(() => ({ error: answer.statusText }));
      say(`${answer.status}: ${refused.error}`, true);
    }
  });

  if (new URLSearchParams(location.search).has("error")) { // shown once: a reload does not repeat it
    const kept = selected ? "?node=" + encodeURIComponent(selected) : "";
    history.replaceState(null, "", location.pathname + kept + location.hash);
  }
  listen();
  const carried = document.getElementById("nodes-data");
  loadNodes(carried ? JSON.parse(carried.textContent) : null)
    .then(() => {
      loaded = true;
      renderNodes();
      body.dataset.firstRender = String(Math.round(performance.now())); // ms from navigation start
      render();
    })
    .catch((error) => say(`Could not list the nodes: ${error.message}`, true));
  Promise.all([loadActors(), loadGroups()])
    .then(render)
    .catch((error) => say(`Could not list actors and groups: ${error.message}`, true));
})();
