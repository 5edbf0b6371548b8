// Progressive enhancement only: every page works without this file.
"use strict";

// The waiting room's door (see README, "Waiting room"): before a join form
// goes, fetch a challenge and have a Web Worker solve it (about a second),
// then submit with the solution in `proof`. Registered before the
// one-submit guard below, which sees only the final submit.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.proofChallenge) return;
  const proof = form.querySelector("input[name=proof]");
  if (!proof || proof.value) return;
  event.preventDefault();
  event.stopImmediatePropagation();
  if (form.dataset.solving === "1") return;
  form.dataset.solving = "1";
  const status = form.querySelector(".proof-status");
  const say = (text) => { if (status) status.textContent = text; };
  const buttons = form.querySelectorAll("button[type=submit]");
  for (const button of buttons) {
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
  }
  const fail = (text) => {
    delete form.dataset.solving;
    for (const button of buttons) {
      button.disabled = false;
      button.removeAttribute("aria-busy");
    }
    say(text);
  };
  say("Solving a small puzzle before joining (about a second)…");
  fetch(form.dataset.proofChallenge, { headers: { accept: "application/json" }, credentials: "same-origin" })
    .then((response) => {
      if (!response.ok) throw new Error("challenge " + response.status);
      return response.json();
    })
    .then((challenge) => new Promise((resolve, reject) => {
      const worker = new Worker(form.dataset.proofWorker);
      worker.onmessage = (message) => {
        if (message.data && message.data.proof) {
          worker.terminate();
          resolve(message.data.proof);
        }
      };
      worker.onerror = (error) => {
        worker.terminate();
        reject(error);
      };
      worker.postMessage({ challenge: challenge.challenge, bits: challenge.difficulty_bits });
    }))
    .then((solution) => {
      proof.value = solution;
      say("Solved; joining…");
      form.submit();
    })
    .catch(() => fail("Could not solve the puzzle; please press the button again."));
});

// One submit per click: disable the button until the answer arrives.
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-once")) return;
  const question = form.getAttribute("data-confirm");
  if (question && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  if (form.dataset.submitting === "1") {
    event.preventDefault();
    return;
  }
  form.dataset.submitting = "1";
  for (const button of form.querySelectorAll("button[type=submit]")) {
    button.disabled = true;
    button.setAttribute("aria-busy", "true");
    button.dataset.label = button.textContent;
    button.textContent = "Working…";
  }
});

// Coming back with the browser's Back button must not leave buttons dead.
window.addEventListener("pageshow", () => {
  for (const form of document.querySelectorAll("form[data-proof-challenge]")) {
    delete form.dataset.solving;
    const proof = form.querySelector("input[name=proof]");
    if (proof) proof.value = "";
  }
  for (const form of document.querySelectorAll("form[data-once]")) {
    delete form.dataset.submitting;
    for (const button of form.querySelectorAll("button[type=submit]")) {
      button.disabled = false;
      button.removeAttribute("aria-busy");
      if (button.dataset.label) button.textContent = button.dataset.label;
    }
  }
});

// Event times are written in the event's own zone, with its abbreviation
// (the server's instant is the truth). A reader whose browser is in another
// zone also sees the time in their own, before the countdown reads the text.
const readerZone = Intl.DateTimeFormat().resolvedOptions().timeZone;
const readerTime = new Intl.DateTimeFormat(undefined, {
  weekday: "short", day: "numeric", month: "short",
  hour: "2-digit", minute: "2-digit", timeZoneName: "short",
});
for (const at of document.querySelectorAll("time[data-zone]")) {
  const instant = new Date(at.getAttribute("datetime"));
  if (!readerZone || at.dataset.zone === readerZone || Number.isNaN(instant.getTime())) continue;
  const local = document.createElement("span");
  local.className = "reader-time";
  local.textContent = ` (${readerTime.format(instant)} your time)`;
  at.after(local);
}

// Countdown to the sale opening; the server refuses early purchases anyway.
// It counts against the server's clock (sent with the page), not the
// buyer's, and reloads with a random delay of up to two seconds so that the
// waiting crowd does not arrive in one burst. A reload that comes too early
// gets a fresh countdown from the server, never a reload loop.
const countdown = document.getElementById("countdown");
if (countdown) {
  const opensAt = Number(countdown.dataset.opensAt);
  const skew = Number(countdown.dataset.serverNow) - Date.now();
  const original = countdown.textContent.trim();
  const pad = (n) => String(n).padStart(2, "0");
  const tick = () => {
    const leftMs = opensAt - (Date.now() + skew);
    if (leftMs <= 0) {
      countdown.textContent = "The sale is open — loading the tickets…";
      setTimeout(() => window.location.reload(), 250 + Math.random() * 1750);
      return;
    }
    const left = Math.ceil(leftMs / 1000);
    const d = Math.floor(left / 86400);
    const h = Math.floor((left % 86400) / 3600);
    const m = Math.floor((left % 3600) / 60);
    const s = left % 60;
    countdown.textContent = original + " Opens in " + (d ? d + "d " : "") +
      pad(h) + ":" + pad(m) + ":" + pad(s) + ".";
    setTimeout(tick, Math.min(1000, leftMs));
  };
  if (Number.isFinite(opensAt) && Number.isFinite(skew)) tick();
}

// The organizer dashboard's waiting room: refresh its figures every five
// seconds from the session's JSON twin of the organizer API. Without this
// file they are as of the page's load.
const liveRoom = document.querySelector("[data-live]");
if (liveRoom) {
  const words = (s) => s < 60 ? s + " s"
    : s < 3600 ? Math.floor(s / 60) + " min " + (s % 60) + " s"
    : Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
  const show = (room) => {
    const state = !room.enabled ? "off" : room.paused ? "paused" : "admitting";
    const values = {
      state,
      waiting: room.waiting,
      admitted_last_minute: room.admitted_last_minute,
      admitted: room.admitted,
      active_passes: room.active_passes,
      estimated_secs_to_clear: room.estimated_secs_to_clear == null ? "—" : words(room.estimated_secs_to_clear),
    };
    for (const [name, value] of Object.entries(values)) {
      const cell = liveRoom.querySelector(`[data-figure="${name}"]`);
      if (cell) cell.textContent = String(value);
    }
    const badge = liveRoom.querySelector("[data-figure=state]");
    if (badge) badge.className = "badge " + state;
  };
  const refresh = () => {
    fetch(liveRoom.dataset.live, { headers: { accept: "application/json" }, credentials: "same-origin" })
      .then((response) => response.ok ? response.json() : null)
      .then((room) => { if (room) show(room); })
      .catch(() => {})
      .finally(() => setTimeout(refresh, 5000));
  };
  setTimeout(refresh, 5000);
}

// A held order's time left, counted against the server's clock (the page
// reloads itself at the end without this).
for (const until of document.querySelectorAll("time[data-countdown]")) {
  const ends = Date.parse(until.getAttribute("datetime"));
  const skew = Number(until.dataset.serverNow) - Date.now();
  const left = document.createElement("span");
  left.className = "time-left";
  until.after(left);
  const tick = () => {
    const s = Math.max(0, Math.round((ends - (Date.now() + skew)) / 1000));
    left.textContent = ` (${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")} left)`;
    if (s > 0) setTimeout(tick, 1000);
  };
  tick();
}
