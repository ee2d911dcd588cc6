// The live page of a node (/inspect).  Every second it asks /inspect.json (the
// node's snapshot and each key's UP/DOWN history) and redraws its tables; each
// state machine's diagram is an image of /inspect/diagram, asked again only when
// the machine's state changed (an SVG Graphviz drew on the node, or the DOT
// text when the node has no Graphviz).  The token the page was opened with
// (?token=...) goes with each request.  window.inspect holds the last answer,
// how many polls succeeded and the last error (tests read it).
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token");
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const view = (window.inspect = { last: null, polls: 0, error: null, diagrams: {} });

  const time = (seconds) => new Date(seconds * 1000).toLocaleTimeString();
  const feedState = (row) => (row.up > 0 ? "UP" : "DOWN");

  function cell(row, value, className) {
    const td = row.insertCell();
    td.textContent = value === null || value === undefined ? "" : String(value);
    if (className) td.className = className;
    else if (typeof value === "number") td.className = "n";
    return td;
  }

  function fill(id, rows, columns) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    for (const item of rows) {
      const row = body.insertRow();
      for (const column of columns) {
        const value = typeof column === "function" ? column(item) : item[column];
        cell(row, value, value === "UP" || value === "DOWN" ? value : undefined);
      }
    }
  }

  function diagramUrl(actor, state) {
    const query = new URLSearchParams({ actor, state });
    if (token) query.set("token", token);
    return `/inspect/diagram?${query}`;
  }

  async function drawDiagram(box, actor, state, svg) {
    const url = diagramUrl(actor, state);
    if (svg) {
      let img = box.querySelector("img");
      if (!img) {
        img = document.createElement("img");
        img.alt = `${actor}'s state machine`;
        box.replaceChildren(img);
      }
      img.src = url;
    } else {
      const answer = await fetch(url, { headers, cache: "no-store" });
      const pre = document.createElement("pre");
      pre.textContent = await answer.text();
      box.replaceChildren(pre);
    }
    view.diagrams[actor] = state;
  }

  function machines(actors, svg) {
    const root = document.getElementById("machines");
    const fsms = actors.filter((a) => a.machine);
    const names = new Set(fsms.map((a) => a.name));
    for (const section of [...root.children]) {
      if (!names.has(section.dataset.actor)) section.remove();
    }
    for (const actor of fsms) {
      let section = [...root.children].find((s) => s.dataset.actor === actor.name);
      if (!section) {
        section = document.createElement("section");
        section.dataset.actor = actor.name;
        section.innerHTML =
          '<h3></h3><div class="machine"><div class="diagram"></div><table><thead><tr>' +
          "<th>time</th><th>event</th><th>from</th><th>to</th></tr></thead><tbody></tbody></table></div>";
        root.append(section);
      }
      const m = actor.machine;
      const title = section.querySelector("h3");
      title.replaceChildren(`${actor.name} (${m.engine}, ${m.state_changes} state changes): `);
      const state = document.createElement("span");
      state.className = "state";
      state.textContent = m.state;
      title.append(state);
      const body = section.querySelector("tbody");
      body.replaceChildren();
      for (const t of [...m.transitions].reverse()) {
        const row = body.insertRow();
        [time(t.time), t.event, t.source, t.target].forEach((v) => cell(row, v));
      }
      if (view.diagrams[actor.name] !== m.state) {
        drawDiagram(section.querySelector(".diagram"), actor.name, m.state, svg);
      }
    }
  }

  function draw(data) {
    document.getElementById("node").textContent = data.node;
    fill("feeds", data.feeds, [
      "message_type", "subject", "role", "scope", "queue", "count", "up", feedState,
    ]);
    const history = document.querySelector("#history tbody");
    history.replaceChildren();
    for (const key of data.feed_history) {
      const row = history.insertRow();
      cell(row, key.type);
      cell(row, key.subject);
      const changes = cell(row, "");
      for (const change of key.changes) {
        const span = document.createElement("span");
        span.className = change.up ? "UP" : "DOWN";
        span.textContent = `${change.up ? "UP" : "DOWN"} ${time(change.time)}`;
        if (changes.childElementCount) changes.append(" → ");
        changes.append(span);
      }
    }
    machines(data.actors, data.svg);
    fill("actors", data.actors, [
      "name", "class_name", "dispatcher", "mailbox", "depth", "max_depth", "tasks_run",
      "failures", "quantum_overruns", (a) => (a.machine ? a.machine.state : ""),
    ]);
    fill("dispatchers", data.dispatchers, [
      "name", "kind", "threads", "actors", "run_queue", "tasks_run", "failures",
      "quantum_overruns",
    ]);
    fill("links", data.links, [
      "name", "peer_node", "address", "status", "messages_out", "messages_in", "bytes_out",
      "bytes_in", "dropped", "lost",
    ]);
    document.getElementById("outstanding").textContent = String(data.requests_outstanding);
    fill("requests", data.requests, ["message_type", "subject", "count"]);
  }

  async function poll() {
    const status = document.getElementById("status");
    try {
      const answer = await fetch("/inspect.json", { headers, cache: "no-store" });
      if (!answer.ok) throw new Error(`${answer.status} ${(await answer.text()).trim()}`);
      const data = await answer.json();
      draw(data);
      view.last = data;
      view.polls += 1;
      view.error = null;
      status.textContent = `updated ${new Date().toLocaleTimeString()}, every second`;
      status.className = "";
    } catch (error) {
      view.error = String(error);
      status.textContent = `not updated: ${error}`;
      status.className = "stale";
    }
    setTimeout(poll, 1000);
  }
  poll();
})();
