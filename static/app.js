// Progressive enhancement only: every page works without this file.
"use strict";

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
  for (const form of document.querySelectorAll("form[data-once]")) {
    delete form.dataset.submitting;
    for (const button of form.querySelectorAll("button[type=submit]")) {
      button.disabled = false;
      button.removeAttribute("aria-busy");
      if (button.dataset.label) button.textContent = button.dataset.label;
    }
  }
});

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
