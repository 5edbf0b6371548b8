// The door's scanner page (src/web/views/door.rs), improved: where the
// browser offers BarcodeDetector, the camera reads the ticket's QR code and
// submits the form. Typing the code always works, with or without this file.
"use strict";

(() => {
  const panel = document.getElementById("camera");
  const form = document.getElementById("scan");
  const code = document.getElementById("code");
  if (!panel || !form || !code) return;
  if (!("BarcodeDetector" in window) || !navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
    return;
  }
  const start = document.getElementById("camera-start");
  const video = document.getElementById("camera-view");
  const status = document.getElementById("camera-status");
  // The camera stays on from one scan to the next (each scan loads a page).
  const KEY = "stampede-door-camera";
  let stream = null;
  panel.hidden = false;

  const stop = () => {
    if (stream) for (const track of stream.getTracks()) track.stop();
    stream = null;
    video.hidden = true;
    video.srcObject = null;
    start.textContent = "Scan with the camera";
  };

  const run = async () => {
    let detector;
    try {
      const formats = await window.BarcodeDetector.getSupportedFormats();
      if (!formats.includes("qr_code")) {
        status.textContent = "This browser cannot read QR codes: type the code.";
        return;
      }
      detector = new window.BarcodeDetector({ formats: ["qr_code"] });
      stream = await navigator.mediaDevices.getUserMedia({
        video: { facingMode: "environment" },
        audio: false,
      });
    } catch (_) {
      sessionStorage.removeItem(KEY);
      status.textContent = "The camera is not available: type the code.";
      return;
    }
    video.srcObject = stream;
    video.hidden = false;
    await video.play().catch(() => {});
    sessionStorage.setItem(KEY, "on");
    start.textContent = "Stop the camera";
    status.textContent = "Point the camera at the ticket's QR code.";
    const look = async () => {
      if (!stream) return;
      try {
        const found = (await detector.detect(video)).find((c) => c.rawValue);
        if (found) {
          code.value = found.rawValue;
          stop();
          status.textContent = "Checking…";
          form.requestSubmit();
          return;
        }
      } catch (_) {
        // A frame that could not be read: try the next one.
      }
      setTimeout(look, 200);
    };
    look();
  };

  start.addEventListener("click", () => {
    if (stream) {
      sessionStorage.removeItem(KEY);
      stop();
      status.textContent = "";
    } else {
      run();
    }
  });
  if (sessionStorage.getItem(KEY) === "on") run();
})();
