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
const countdown = document.getElementById("countdown");
if (countdown) {
  const opensAt = Number(countdown.dataset.opensAt) * 1000;
  const original = countdown.textContent;
  const tick = () => {
    const left = Math.max(0, Math.round((opensAt - Date.now()) / 1000));
    if (left === 0) {
      countdown.textContent = "The sale is open — reloading…";
      window.location.reload();
      return;
    }
    const d = Math.floor(left / 86400);
    const h = Math.floor((left % 86400) / 3600);
    const m = Math.floor((left % 3600) / 60);
    const s = left % 60;
    const parts = (d ? d + "d " : "") + String(h).padStart(2, "0") + ":" +
      String(m).padStart(2, "0") + ":" + String(s).padStart(2, "0");
    countdown.textContent = original.trim() + " Opens in " + parts + ".";
    setTimeout(tick, 1000);
  };
  tick();
}
