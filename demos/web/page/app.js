// The web demo's page: plots the moving averages, shows the feed's state,
// asks the stats replier (streamed replies) and stops/starts the source.
// `window.demo` exposes what the page received (for a test or the console).
import { ActorBus } from "/actorbus.js";

const $ = (id) => document.getElementById(id);
const demo = { averages: [], state: "DOWN", states: [], replies: [], errors: [], bus: null };
window.demo = demo;

function draw() {
  const canvas = $("chart");
  const g = canvas.getContext("2d");
  const points = demo.averages.slice(-200);
  g.clearRect(0, 0, canvas.width, canvas.height);
  g.strokeStyle = "#eee";
  for (let y = 0; y <= 100; y += 25) {
    const py = canvas.height - (y / 100) * canvas.height;
    g.beginPath(); g.moveTo(0, py); g.lineTo(canvas.width, py); g.stroke();
  }
  g.strokeStyle = "#2a7";
  g.lineWidth = 2;
  g.beginPath();
  points.forEach((a, i) => {
    const x = (i / 199) * canvas.width;
    const y = canvas.height - (a / 100) * canvas.height;
    if (i) g.lineTo(x, y); else g.moveTo(x, y);
  });
  g.stroke();
}

function showState(state) {
  demo.state = state;
  demo.states.push(state);
  $("state").textContent = state;
  $("state").className = state;
}

function showReply(text, cls) {
  const li = document.createElement("li");
  li.textContent = text;
  if (cls) li.className = cls;
  $("replies").append(li);
}

async function control(action) {
  try {
    const reply = await demo.bus.request("demo.web.Control", "/demo/control", { action });
    $("control").textContent = `source ${reply.value.source}`;
  } catch (error) {
    $("control").textContent = String(error.message);
  }
}

async function askStats(event) {
  event.preventDefault();
  $("replies").replaceChildren();
  demo.replies = [];
  const last = Number($("last-n").value);
  try {
    for await (const reply of demo.bus.requestAll("demo.web.Stats", "/demo/stats", { last })) {
      demo.replies.push(reply.value);
      if (reply.error !== undefined) showReply(reply.error, "error");
      else if (reply.value.label !== undefined)
        showReply(`${reply.value.label}: ${reply.value.value.toFixed(2)} (${reply.value.status})`,
                  reply.remaining === 0 ? "final" : "");
    }
  } catch (error) {
    showReply(String(error.message), "error");
  }
}

const scheme = location.protocol === "https:" ? "wss" : "ws";
const token = new URLSearchParams(location.search).get("token") ?? undefined;
demo.bus = await ActorBus.connect(`${scheme}://${location.host}/jrep`, { token });
demo.bus.onError((e) => {
  demo.errors.push(e);
  $("error").textContent = `${e.code}: ${e.message}`;
});
demo.bus.subscribe(
  "demo.calculator.MovingAverage",
  "/demo/average",
  (value) => {
    demo.averages.push(value.average);
    $("count").textContent = demo.averages.length;
    $("last").textContent = value.average.toFixed(2);
    requestAnimationFrame(draw);
  },
  showState,
);
$("stop").onclick = () => control("stop");
$("start").onclick = () => control("start");
$("stats").onsubmit = askStats;
demo.ready = true;
