// The live page of a node (/inspect): polls /inspect.json every second and
// redraws its tables.  The token the page was opened with (?token=...) goes
// with each poll as an Authorization header.  window.inspect holds the last
// answer and how many polls succeeded (tests read it).
"use strict";
(() => {
  const token = new URLSearchParams(location.search).get("token");
  const headers = token ? { Authorization: `Bearer ${token}` } : {};
  const view = (window.inspect = { last: null, polls: 0, error: null });

  function cell(row, value, className) {
    const td = row.insertCell();
    td.textContent = value === null || value === undefined ? "" : String(value);
    if (className) td.className = className;
    else if (typeof value === "number") td.className = "n";
  }

  function fill(id, rows, columns) {
    const body = document.querySelector(`#${id} tbody`);
    body.replaceChildren();
    for (const item of rows) {
      const row = body.insertRow();
      for (const column of columns) {
        cell(row, item[column], column === "state" ? item.state : undefined);
      }
    }
  }

  function draw(data) {
    document.getElementById("node").textContent = data.node;
    fill("feeds", data.feeds, ["type", "subject", "role", "scope", "count", "state"]);
    fill("actors", data.actors, ["name", "dispatcher", "state", "depth", "max_depth"]);
    fill("dispatchers", data.dispatchers, [
      "name", "kind", "threads", "tasks_run", "failures", "overruns", "run_queue",
    ]);
    fill("links", data.links, [
      "name", "peer", "status", "messages_out", "messages_in", "bytes_out", "bytes_in",
      "dropped", "lost",
    ]);
    document.getElementById("requests").textContent = String(data.outstanding_requests);
  }

  async function poll() {
    const status = document.getElementById("status");
    try {
      const answer = await fetch("/inspect.json", { headers, cache: "no-store" });
      if (!answer.ok) throw new Error(`${answer.status} ${(await answer.text()).trim()}`);
      const data = await answer.json();
      view.last = data;
      view.polls += 1;
      view.error = null;
      draw(data);
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
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
