// armada-server web UI: live regions, confirmed actions, following logs. No dependencies.
(() => {
  "use strict";
  // URLs from the origin: a page opened as http://user:pass@host/ must not pass its
  // credentials on to fetch(), which refuses URLs that carry them.
  const url = (path) => new URL(path, location.origin).toString();
  const $ = (id) => document.getElementById(id);

  function flash(text, kind) {
    const box = $("flash");
    box.textContent = text;
    box.className = kind;
    box.hidden = false;
    clearTimeout(flash.timer);
    flash.timer = setTimeout(() => { box.hidden = true; }, 15000);
  }

  // --- live regions: refreshed from the server when the job sets they show change -------
  let refreshing = false;
  let again = false;
  async function refresh() {
    if (refreshing || $("confirm").open) { again = true; return; }
    refreshing = true;
    try {
      const response = await fetch(url(location.pathname + location.search),
                                   {headers: {Accept: "text/html"}, cache: "no-store"});
      if (response.ok) {
        const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
        for (const part of document.querySelectorAll("[data-live]")) {
          const next = fresh.getElementById(part.id);
          if (next && next.innerHTML !== part.innerHTML) part.innerHTML = next.innerHTML;
        }
        document.dispatchEvent(new Event("live-refreshed"));
      }
    } catch (e) {
      // the next change or period tries again
    } finally {
      refreshing = false;
      if (again) { again = false; setTimeout(refresh, 250); }
    }
  }

  function relevant(changed) {
    const scope = document.body.dataset.scope || "*";
    if (scope === "*" || changed === "*") return true;
    if (scope.startsWith("queue:")) {
      const queue = scope.slice(6);
      return changed.some(([q]) => q === queue);
    }
    try {
      const [queue, jobSet] = JSON.parse(scope);
      return changed.some(([q, s]) => q === queue && s === jobSet);
    } catch (e) {
      return true;
    }
  }

  // A page left for another closes its stream: a browser keeps a left page (its back-forward
  // cache) and its open stream with it, and allows a site six connections (HTTP/1.1), so a
  // few pages visited one after another would leave none for the next. A page shown again
  // from that cache opens a new stream and catches up.
  function connect() {
    const dot = $("live-status");
    let source = null;
    const open = () => {
      source = new EventSource(url("/ui/live"));
      source.addEventListener("hello", () => { dot.className = "live-on"; });
      source.addEventListener("change", (event) => {
        if (relevant(JSON.parse(event.data))) refresh();
      });
      source.onerror = () => { dot.className = "live-off"; };  // EventSource reconnects
    };
    window.addEventListener("pagehide", () => {
      source.close();
      dot.className = "live-off";
    });
    window.addEventListener("pageshow", (event) => {
      if (!event.persisted) return;
      open();
      refresh();
    });
    open();
  }

  // --- actions: confirm in a dialog, then call the REST gateway ---------------------------
  function describe(label, data) {
    if (Array.isArray(data.jobIds)) return `${label}: ${data.count} job(s)`;
    if (Array.isArray(data.cancelledIds)) {
      return `${label}: cancelled ${data.cancelledIds.length} job(s)`;
    }
    if (data.results) {
      const failed = Object.entries(data.results).filter(([, error]) => error);
      if (failed.length) return `${label}: ` + failed.map(([j, e]) => `${j}: ${e}`).join("; ");
      return `${label}: done for ${Object.keys(data.results).length} job(s)`;
    }
    return `${label}: done`;
  }

  async function send(path, body, label) {
    let response;
    try {
      response = await fetch(url(path), {method: "POST", body: JSON.stringify(body),
                                         headers: {"Content-Type": "application/json"}});
    } catch (e) {
      flash(`${label}: ${e}`, "error");
      return;
    }
    let data = {};
    try { data = await response.json(); } catch (e) { /* not JSON */ }
    if (!response.ok) {
      flash(`${label}: ${data.error ? data.error.message : "HTTP " + response.status}`, "error");
    } else {
      flash(describe(label, data), "ok");
    }
    refresh();
  }

  function ask(button, message) {
    const dialog = $("confirm");
    const input = $("confirm-input");
    const prompt = button.dataset.prompt;
    $("confirm-message").textContent = message || button.dataset.confirm;
    $("confirm-input-label").hidden = !prompt;
    $("confirm-input-name").textContent = prompt || "";
    input.value = "";
    dialog.returnValue = "";
    dialog.onclose = () => {
      if (dialog.returnValue !== "ok") return;
      const body = JSON.parse(button.dataset.body);
      if (prompt) {
        if (input.value === "" || Number.isNaN(Number(input.value))) {
          flash(`${button.textContent}: enter a number`, "error");
          return;
        }
        body[prompt] = Number(input.value);
      }
      send(button.dataset.url, body, button.textContent.trim());
    };
    dialog.showModal();
    if (prompt) input.focus();
  }

  // A bulk action asks the server first how many jobs it would change for this caller.
  async function askBulk(button) {
    const label = button.textContent.trim();
    let response;
    try {
      const body = {...JSON.parse(button.dataset.body), dryRun: true};
      response = await fetch(url(button.dataset.url), {method: "POST", body: JSON.stringify(body),
                                                       headers: {"Content-Type": "application/json"}});
    } catch (e) {
      flash(`${label}: ${e}`, "error");
      return;
    }
    const data = await response.json().catch(() => ({}));
    if (!response.ok) {
      flash(`${label}: ${data.error ? data.error.message : "HTTP " + response.status}`, "error");
      return;
    }
    if (!data.count) {
      flash(`${label}: no job you may change matches this filter`, "ok");
      return;
    }
    const left = data.excluded ? ` (${data.excluded} more in queues you may not change are left out)` : "";
    ask(button, `${button.dataset.confirm.replace("{count}", data.count)}${left}`);
  }

  document.addEventListener("click", (event) => {
    const button = event.target.closest("button.action");
    if (!button) return;
    event.preventDefault();
    if (button.classList.contains("bulk")) askBulk(button);
    else ask(button);
  });

  // --- logs: the latest run's lines, followed while the job runs ---------------------------
  function followLogs() {
    const box = $("logs-box");
    if (!box) return;
    const pre = $("logs");
    const status = $("log-status");
    const select = $("log-container");
    let since = "";
    let generation = 0;
    let timer = null;
    const finished = () => {
      const summary = $("job-summary");
      return summary && summary.dataset.terminal === "true";
    };
    async function poll(mine) {
      // Read "finished" first: lines written before the job ended are in this answer.
      const done = finished();
      const query = new URLSearchParams();
      if (select.value) query.set("container", select.value);
      if (since) query.set("sinceTime", since); else query.set("tailLines", "5000");
      try {
        const response = await fetch(url(`/api/v1/jobs/${box.dataset.jobId}/logs?${query}`),
                                     {cache: "no-store"});
        const data = await response.json();
        if (mine !== generation) return;
        if (!response.ok) {
          status.textContent = data.error ? data.error.message : `HTTP ${response.status}`;
        } else {
          if (data.lines.length) {
            const bottom = pre.scrollTop + pre.clientHeight >= pre.scrollHeight - 4;
            pre.append(document.createTextNode(data.lines.map((l) => l.line).join("\n") + "\n"));
            since = data.lines[data.lines.length - 1].timestamp;
            if (bottom) pre.scrollTop = pre.scrollHeight;
          }
          status.textContent = done ? "(the job has finished)" : "following…";
        }
      } catch (e) {
        status.textContent = "reconnecting…";
      }
      if (mine === generation && !done) timer = setTimeout(() => poll(mine), 1000);
    }
    select.addEventListener("change", () => {
      generation += 1;
      clearTimeout(timer);
      since = "";
      pre.textContent = "";
      poll(generation);
    });
    poll(generation);
  }

  document.addEventListener("DOMContentLoaded", () => {
    connect();
    const period = Number(document.body.dataset.refresh || 0);
    if (period > 0) setInterval(refresh, period * 1000);
    followLogs();
  });
})();
