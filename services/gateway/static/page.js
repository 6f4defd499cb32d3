// Corral's page, live: each event of the stream marks the sections it changes, which are fetched again as
// server-rendered fragments at most every 300 ms; the taint forms go through proposal 002's calls with the token
// kept in sessionStorage (never a cookie). Without this script the page and its forms still work.
(() => {
  "use strict";
  const DEBOUNCE_MS = 300;
  const TOKEN_KEY = "corral-token";
  const body = document.body;
  const status = document.getElementById("status");
  const live = document.getElementById("live");
  document.documentElement.classList.add("js");

  function say(text, isError) {
    status.textContent = text;
    status.hidden = !text;
    status.classList.toggle("error", Boolean(isError));
  }

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

  const dirty = new Set();
  const asked = {};
  let timer = null;

  function schedule(names) {
    names.forEach((name) => dirty.add(name));
    if (timer === null) timer = setTimeout(flush, DEBOUNCE_MS);
  }

  function flush() {
    timer = null;
    const names = [...dirty];
    dirty.clear();
    names.forEach(refresh);
  }

  async function refresh(name) {
    const target = document.querySelector(`[data-section="${name}"]`);
    if (!target) return;
    const typing = target.contains(document.activeElement) && document.activeElement.matches("input, select");
    if (typing && document.activeElement.value) {
      schedule([name]); // do not wipe what is being typed: try again later
      return;
    }
    const turn = (asked[name] = (asked[name] || 0) + 1);
    try {
      const answer = await fetch("/ui/" + name, { headers: { Accept: "text/html" } });
      if (!answer.ok) throw new Error(`${answer.status} ${answer.statusText}`);
      const html = await answer.text();
      if (turn === asked[name]) target.innerHTML = html;
    } catch (error) {
      say(`Could not refresh ${name}: ${error.message}`, true);
    }
  }

  function listen() {
    const kinds = JSON.parse(body.dataset.events || "{}");
    const source = new EventSource("/api/v1/events?since=" + encodeURIComponent(body.dataset.since || "1"));
    for (const [kind, names] of Object.entries(kinds)) source.addEventListener(kind, () => schedule(names));
    source.addEventListener("open", () => {
      live.textContent = "live";
      live.className = "live";
    });
    source.addEventListener("error", () => {
      live.textContent = "reconnecting…";
      live.className = "muted";
    });
  }

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
      schedule(["nodes", "pending"]);
    } else {
      const refused = await answer.json().catch(() => ({ error: answer.statusText }));
      say(`${answer.status}: ${refused.error}`, true);
    }
  });

  if (new URLSearchParams(location.search).has("error")) {
    history.replaceState(null, "", location.pathname + location.hash); // shown once: a reload does not repeat it
  }
  listen();
})();
