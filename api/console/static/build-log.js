// Streams an image build's log into the page (server-sent events from the console),
// then shows how the build ended. The page works without it: reloading shows the log.
"use strict";
(function () {
  const log = document.getElementById("build-log");
  if (!log || log.dataset.running !== "yes" || !window.EventSource) return;
  const state = document.querySelector("[data-testid=build-state]");
  const digest = document.querySelector("[data-testid=build-digest]");
  log.textContent = ""; // the stream sends the log from its first line
  const events = new EventSource(log.dataset.events);
  events.addEventListener("log", (event) => {
    log.textContent += JSON.parse(event.data) + "\n";
    log.scrollTop = log.scrollHeight;
  });
  events.addEventListener("done", (event) => {
    const build = JSON.parse(event.data);
    state.textContent = build.state;
    state.className = "status status-" + build.state;
    digest.textContent = build.digest || "—";
    if (build.error) log.textContent += "error: " + build.error + "\n";
    events.close();
  });
})();
