// The pay page: Stripe.js's card field and the Pay button. Card data goes
// from the browser to Stripe only; our server learns of the payment from
// Stripe (its signed webhook, or by asking), never from this script.
(function () {
  "use strict";
  var form = document.getElementById("pay-form");
  if (!form || typeof Stripe === "undefined") {
    var missing = document.getElementById("pay-error");
    if (missing) {
      missing.textContent = "The card form could not load. Check your connection and reload this page.";
    }
    return;
  }
  var stripe = Stripe(form.dataset.publishableKey);
  var elements = stripe.elements();
  var card = elements.create("card");
  card.mount("#card-element");
  var button = document.getElementById("pay-button");
  var error = document.getElementById("pay-error");
  var paying = false;
  form.addEventListener("submit", function (event) {
    event.preventDefault();
    // A double click pays once: one confirmation at a time, and Stripe
    // refuses to charge a PaymentIntent that has succeeded.
    if (paying) {
      return;
    }
    paying = true;
    button.disabled = true;
    error.textContent = "";
    stripe
      .confirmCardPayment(form.dataset.clientSecret, { payment_method: { card: card } })
      .then(function (result) {
        if (result.error) {
          error.textContent = result.error.message || "The payment did not go through.";
          paying = false;
          button.disabled = false;
          return;
        }
        window.location.assign(form.dataset.returnUrl);
      });
  });
})();
