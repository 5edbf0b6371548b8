//! The main path in a real browser: headless Chromium driven through
//! chromedriver (started here, on a free loopback port) with `fantoccini`.
//!
//! An organizer signs up and publishes an event through the forms; buyers
//! in another browser session buy it out; the pages, the buy button's
//! double-submit guard (static/app.js) and the tables are checked on the way.
//!
//! Screenshots go to target/screenshots/. With STAMPEDE_UPDATE_SCREENSHOTS=1
//! the event page and the organizer dashboard are also written to
//! docs/screenshots/ (commit-ready); without it docs/ is never touched.
//!
//! Needs /usr/bin/chromium and /usr/bin/chromedriver (Debian's `chromium`
//! and `chromium-driver`; ./scripts/test installs them when it can). Without
//! them the test fails with a message saying so: it never skips silently.

// A test that cannot go on panics: unwrap and expect say where.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "it/common/mod.rs"]
mod common;

use std::{
    future::Future,
    os::unix::process::CommandExt as _,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    sync::atomic::{AtomicUsize, Ordering},
    time::{Duration, Instant},
};

use common::{TestApp, form_time, order_status, remaining, ticket_codes};
use fantoccini::{Client, ClientBuilder, Locator, elements::Element};
use hyper_util::client::legacy::connect::HttpConnector;
use serde_json::{Value, json};
use sqlx::PgPool;
use stampede::{
    clock::{Clock as _, ManualClock},
    domain::ConfirmKey,
    mail::MailSettings,
    web::AppState,
};
use time::{Duration as Span, macros::time};
use uuid::Uuid;

const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
const CHROMIUM: &str = "/usr/bin/chromium";
/// Upper bound for any single wait on the browser (page loads, elements).
const WAIT: Duration = Duration::from_secs(30);
/// How often a condition is re-checked while waiting.
const POLL: Duration = Duration::from_millis(50);

const TITLE: &str = "Night of the Stampede";
const PASSWORD: &str = "correct horse battery staple";

#[sqlx::test]
async fn an_organizer_sells_out_an_event_to_buyers_in_a_real_browser(pool: PgPool) {
    // Declared first so that it is dropped last: chromedriver and every
    // Chromium it started are stopped even when an assertion panics.
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn(pool.clone()).await;
    let organizer = driver.browser().await;
    let buyer = driver.browser().await;
    let now = app.clock.now();

    // 1. The organizer signs up and creates a published event with two
    //    ticket types, all through the forms.
    organizer.goto(&app.url("/signup")).await.unwrap();
    type_into(&organizer, "#email", "Organizer@Example.org").await;
    type_into(&organizer, "#password", PASSWORD).await;
    click(&organizer, "form[action='/signup'] button[type=submit]").await;
    wait_for_path(&organizer, "the organizer area after signing up", |p| {
        p == "/organizer"
    })
    .await;
    let organizer_id: Uuid =
        sqlx::query_scalar("SELECT id FROM organizers WHERE email = 'organizer@example.org'")
            .fetch_one(&pool)
            .await
            .unwrap();
    // Until the address is confirmed the account may not publish, and its
    // page says so with a button that mails the link again. No mailer runs
    // here: the link is confirmed as following it does (the real link is
    // followed in tests/it/http/accounts/email_confirmation.rs).
    find(
        &organizer,
        "form[action='/organizer/settings/confirmation-mail'] button",
    )
    .await;
    sqlx::query("UPDATE organizers SET email_confirmed_at = now() WHERE id = $1")
        .bind(organizer_id)
        .execute(&pool)
        .await
        .unwrap();

    click(&organizer, "a[href='/organizer/events/new']").await;
    wait_for_path(&organizer, "the new-event form", |p| {
        p == "/organizer/events/new"
    })
    .await;
    let starts_at = (now + Span::days(45)).replace_time(time!(19:30));
    let sale_opens_at = now - Span::hours(1);
    type_into(&organizer, "#title", TITLE).await;
    type_into(&organizer, "#venue", "Hall 1, Harbour Street").await;
    type_into(
        &organizer,
        "#description",
        "Doors at 19:00. Standing in front, seats on the balcony.",
    )
    .await;
    // Typing into a datetime-local input depends on the browser's locale;
    // its value is the same everywhere.
    set_value(&organizer, "#starts_at", &form_time(starts_at)).await;
    set_value(&organizer, "#sale_opens_at", &form_time(sale_opens_at)).await;
    type_into(&organizer, "#tt-name-0", "Standing").await;
    type_into(&organizer, "#tt-price-0", "25.00").await;
    type_into(&organizer, "#tt-capacity-0", "3").await;
    type_into(&organizer, "#tt-max_per_order-0", "2").await;
    type_into(&organizer, "#tt-name-1", "Seated").await;
    type_into(&organizer, "#tt-price-1", "40.00").await;
    type_into(&organizer, "#tt-capacity-1", "2").await;
    // This server has no Stripe: the organizer collects the money at the
    // door, and orders are confirmed at once.
    click(&organizer, "#payment option[value=offline]").await;
    click(&organizer, "input[name=status][value=published]").await;
    assert!(
        find(&organizer, "input[name=status][value=published]")
            .await
            .is_selected()
            .await
            .unwrap(),
        "the Publish now box is ticked"
    );
    click(&organizer, "form.event-form button[type=submit]").await;
    let path = wait_for_path(
        &organizer,
        "the event's organizer page after creating it",
        |p| p.starts_with("/organizer/events/") && p != "/organizer/events/new",
    )
    .await;

    let (event_id, status, owner): (Uuid, String, Option<Uuid>) =
        sqlx::query_as("SELECT id, status, organizer_id FROM events WHERE title = $1")
            .bind(TITLE)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(path, format!("/organizer/events/{event_id}"));
    assert_eq!(status, "published");
    assert_eq!(owner, Some(organizer_id));
    let ticket_types: Vec<TicketTypeRow> = sqlx::query_as(
        "SELECT id, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer
         FROM ticket_types WHERE event_id = $1 ORDER BY position",
    )
    .bind(event_id)
    .fetch_all(&pool)
    .await
    .unwrap();
    let summary: Vec<_> = ticket_types
        .iter()
        .map(
            |(_, name, price, currency, cap, left, per_order, per_buyer)| {
                (
                    name.as_str(),
                    *price,
                    currency.as_str(),
                    *cap,
                    *left,
                    *per_order,
                    *per_buyer,
                )
            },
        )
        .collect();
    assert_eq!(
        summary,
        [
            ("Standing", 2500, "EUR", 3, 3, 2, 2),
            ("Seated", 4000, "EUR", 2, 2, 2, 2),
        ]
    );
    let standing = ticket_types[0].0;
    let seated = ticket_types[1].0;
    let event_path = format!("/events/{event_id}");

    // 2. A buyer, in a browser session of their own, finds the event on the
    //    front page.
    buyer.goto(&app.url("/")).await.unwrap();
    let link = buyer
        .wait()
        .at_most(WAIT)
        .for_element(Locator::LinkText(TITLE))
        .await
        .unwrap();
    link.click().await.unwrap();
    wait_for_path(&buyer, "the event page", |p| p == event_path).await;
    find(&buyer, "form.buy").await;
    assert_eq!(
        texts(&buyer, ".ticket-type").await,
        [
            "Standing 25.00 EUR 3 of 3 left",
            "Seated 40.00 EUR 2 of 2 left"
        ]
    );
    // The stylesheet arrived (hashed asset URL, CSP): the header is dark.
    let header = find(&buyer, "header.site").await;
    assert_eq!(
        header.css_value("background-color").await.unwrap(),
        "rgba(27, 31, 36, 1)"
    );
    screenshot(&buyer, "event").await;

    // 5. The buy button is disabled by the first submit (static/app.js) and
    //    a second submit is stopped. A listener on `window` runs after
    //    app.js's listener on `document` and cancels the navigation, so the
    //    page stays and can be inspected; nothing is bought.
    fill_buy_form(&buyer, standing, "2", "ada@example.org").await;
    buyer
        .execute(
            "window.submits = [];
             window.addEventListener('submit', (event) => {
               const button = event.target.querySelector('button[type=submit]');
               window.submits.push({ prevented: event.defaultPrevented, disabled: button.disabled });
               event.preventDefault();
             });",
            vec![],
        )
        .await
        .unwrap();
    click(&buyer, "form.buy button[type=submit]").await;
    let after_click = buyer
        .execute(
            "const button = document.querySelector('form.buy button[type=submit]');
             return { disabled: button.disabled, busy: button.getAttribute('aria-busy'),
                      label: button.textContent, submits: window.submits };",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        after_click,
        json!({
            "disabled": true, "busy": "true", "label": "Working…",
            "submits": [{ "prevented": false, "disabled": true }],
        }),
        "the first submit goes through and disables the button"
    );
    let after_second = buyer
        .execute(
            "document.querySelector('form.buy').requestSubmit(); return window.submits;",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(
        after_second,
        json!([
            { "prevented": false, "disabled": true },
            { "prevented": true, "disabled": true },
        ]),
        "app.js cancels a second submit of the same form"
    );
    assert_eq!(common::order_count(&pool).await, 0);

    // 2 (cont.). A fresh page, and the real purchase: 2 Standing.
    buyer.goto(&app.url(&event_path)).await.unwrap();
    fill_buy_form(&buyer, standing, "2", "Ada@Example.org").await;
    click(&buyer, "form.buy button[type=submit]").await;
    let order_path = wait_for_path(&buyer, "the order page", |p| p.starts_with("/orders/")).await;
    let ada_order = order_id(&order_path);
    assert_eq!(
        find(&buyer, "article.order h1").await.text().await.unwrap(),
        "You have 2 tickets"
    );
    let codes = check_tickets(&buyer, &pool, ada_order, 2).await;
    let order: (String, i32, String, Uuid, i64, String) = sqlx::query_as(
        "SELECT email, quantity, status, ticket_type_id, unit_price_minor, currency FROM orders WHERE id = $1",
    )
    .bind(ada_order)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        order,
        (
            "ada@example.org".to_owned(),
            2,
            "confirmed".to_owned(),
            standing,
            2500,
            "EUR".to_owned()
        )
    );
    assert_eq!(codes.len(), 2);
    assert_eq!(common::order_count(&pool).await, 1);
    assert_eq!(remaining(&pool, standing).await, 1);
    screenshot(&buyer, "order").await;

    // 3. Another buyer (cookies cleared: a new visitor) asks for 2 Standing;
    //    1 is left. The form comes back filled in with the reason.
    buyer.delete_all_cookies().await.unwrap();
    event_page_showing(
        &buyer,
        &app.url(&event_path),
        &[
            "Standing 25.00 EUR 1 of 3 left",
            "Seated 40.00 EUR 2 of 2 left",
        ],
    )
    .await;
    fill_buy_form(&buyer, standing, "2", "bea@example.org").await;
    click(&buyer, "form.buy button[type=submit]").await;
    let error = find(&buyer, "#form-error").await.text().await.unwrap();
    assert!(
        error.contains("Only 1 left"),
        "the refusal says how many are left: {error:?}"
    );
    assert_eq!(value(&buyer, "#email").await, "bea@example.org");
    assert_eq!(value(&buyer, "#quantity").await, "2");
    assert!(
        find(&buyer, &radio(standing))
            .await
            .is_selected()
            .await
            .unwrap(),
        "the chosen ticket type is still chosen"
    );
    // The button works again on the answer page.
    assert!(
        find(&buyer, "form.buy button[type=submit]")
            .await
            .is_enabled()
            .await
            .unwrap()
    );
    assert_eq!(common::order_count(&pool).await, 1);
    assert_eq!(ticket_count(&pool).await, 2);
    assert_eq!(remaining(&pool, standing).await, 1);
    screenshot(&buyer, "not-enough-left").await;

    // 4. She takes the last Standing ticket with the same form...
    let quantity = find(&buyer, "#quantity").await;
    quantity.clear().await.unwrap();
    quantity.send_keys("1").await.unwrap();
    click(&buyer, "form.buy button[type=submit]").await;
    let order_path = wait_for_path(&buyer, "the second order page", |p| {
        p.starts_with("/orders/")
    })
    .await;
    let bea_order = order_id(&order_path);
    assert_eq!(
        find(&buyer, "article.order h1").await.text().await.unwrap(),
        "You have 1 ticket"
    );
    check_tickets(&buyer, &pool, bea_order, 1).await;

    // ...and a third buyer takes both Seated: Standing is no longer offered.
    buyer.delete_all_cookies().await.unwrap();
    buyer.goto(&app.url(&event_path)).await.unwrap();
    find(&buyer, "form.buy").await;
    assert!(
        buyer
            .find_all(Locator::Css(&radio(standing)))
            .await
            .unwrap()
            .is_empty(),
        "a sold-out ticket type cannot be chosen"
    );
    fill_buy_form(&buyer, seated, "2", "cy@example.org").await;
    click(&buyer, "form.buy button[type=submit]").await;
    let order_path = wait_for_path(&buyer, "the third order page", |p| {
        p.starts_with("/orders/")
    })
    .await;
    let cy_order = order_id(&order_path);
    // The address the purchase landed on carries the cancel secret.
    let cy_page = buyer.current_url().await.unwrap().to_string();
    assert!(cy_page.contains("?s="), "{cy_page}");
    check_tickets(&buyer, &pool, cy_order, 2).await;

    // Sold out: the event page says so and offers no form.
    buyer.goto(&app.url(&event_path)).await.unwrap();
    let notice = find(&buyer, "p.notice.sold-out")
        .await
        .text()
        .await
        .unwrap();
    assert!(notice.contains("Sold out"), "sold-out notice: {notice:?}");
    assert!(
        buyer
            .find_all(Locator::Css("form.buy"))
            .await
            .unwrap()
            .is_empty(),
        "no buy form on a sold-out event"
    );
    assert_eq!(
        texts(&buyer, ".ticket-type").await,
        ["Standing 25.00 EUR Sold out", "Seated 40.00 EUR Sold out"]
    );
    screenshot(&buyer, "sold-out").await;
    buyer.goto(&app.url("/")).await.unwrap();
    assert_eq!(
        texts(&buyer, ".event-list .badge").await,
        ["Sold out"],
        "the front page shows the event as sold out"
    );

    let orders: Vec<(Uuid, String, Uuid, i32, String)> = sqlx::query_as(
        "SELECT id, email, ticket_type_id, quantity, status FROM orders ORDER BY created_at, id",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let confirmed = |id, email: &str, tt, n| (id, email.to_owned(), tt, n, "confirmed".to_owned());
    assert_eq!(
        orders,
        [
            confirmed(ada_order, "ada@example.org", standing, 2),
            confirmed(bea_order, "bea@example.org", standing, 1),
            confirmed(cy_order, "cy@example.org", seated, 2),
        ]
    );
    assert_eq!(ticket_count(&pool).await, 5);
    assert_eq!(remaining(&pool, standing).await, 0);
    assert_eq!(remaining(&pool, seated).await, 0);
    common::assert_invariants(&pool).await;

    // The organizer's page for the event, whatever it shows today.
    organizer
        .goto(&app.url(&format!("/organizer/events/{event_id}")))
        .await
        .unwrap();
    find(&organizer, "main").await;
    assert_not_an_error_page(&organizer, "the organizer's event page").await;
    screenshot(&organizer, "dashboard").await;
    publish_screenshots(&["event", "dashboard"]);

    // 6. A buyer cancels an order: app.js asks first (data-confirm). Saying
    //    no changes nothing and leaves the button usable; saying yes
    //    cancels, and the tickets go back on sale.
    buyer.goto(&cy_page).await.unwrap();
    let cancel = "form[action$='/cancel'] button[type=submit]";
    click(&buyer, cancel).await;
    assert_eq!(
        alert_text(&buyer).await,
        "Cancel this order and release its tickets?"
    );
    buyer.dismiss_alert().await.unwrap();
    assert!(find(&buyer, cancel).await.is_enabled().await.unwrap());
    assert_eq!(order_status(&pool, cy_order).await, "confirmed");
    click(&buyer, cancel).await;
    alert_text(&buyer).await;
    buyer.accept_alert().await.unwrap();
    until(&buyer, "the cancelled order page", || async {
        let heading = buyer
            .execute(
                "const h = document.querySelector('article.order h1'); return h && h.textContent;",
                vec![],
            )
            .await
            .ok()?;
        (heading == "Order cancelled").then_some(())
    })
    .await;
    assert_eq!(order_status(&pool, cy_order).await, "cancelled");
    assert_eq!(remaining(&pool, seated).await, 2);
    common::assert_invariants(&pool).await;
    event_page_showing(
        &buyer,
        &app.url(&event_path),
        &[
            "Standing 25.00 EUR Sold out",
            "Seated 40.00 EUR 2 of 2 left",
        ],
    )
    .await;
    find(&buyer, &radio(seated)).await;

    buyer.close().await.unwrap();
    organizer.close().await.unwrap();
}

/// The door: a staff member opens the staff link on a phone-sized screen,
/// types a ticket's code and sees green, types it again and sees red.
#[sqlx::test]
async fn a_staff_member_checks_a_ticket_in_once_at_the_door_in_a_real_browser(pool: PgPool) {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn(pool.clone()).await;
    let org = app.organizer("door-staff@example.org").await;
    let event =
        common::organizer::owned_published_event(&org, &[common::TicketSpec::new(10, 4, 8)]).await;
    let code = common::checkin::bought_codes(&app, event.ticket_type_id(), 1, "guest@example.org")
        .await
        .remove(0);
    let secret =
        common::checkin::door_link(&org, event.event_id, "Main entrance", app.clock.now()).await;
    let staff = driver.browser().await;
    staff.set_window_size(420, 900).await.unwrap();
    staff
        .goto(&app.url(&format!("/door?s={secret}")))
        .await
        .unwrap();
    find(&staff, "form#scan").await;
    assert_not_an_error_page(&staff, "the scanner").await;

    let scan = |expected: &'static str| {
        let staff = &staff;
        let code = &code;
        async move {
            type_into(staff, "#code", code).await;
            click(staff, "form#scan button[type=submit]").await;
            until(staff, expected, || async {
                let shown = staff
                    .execute(
                        "const r = document.getElementById('scan-result'); return r ? r.dataset.result : null;",
                        vec![],
                    )
                    .await
                    .ok()?;
                (shown.as_str() == Some(expected)).then_some(())
            })
            .await;
        }
    };
    scan("ok").await;
    assert_eq!(texts(&staff, "#scan-result .verdict").await, ["✓ Let in"]);
    assert_eq!(
        texts(&staff, "#scan-result .ticket-type-name").await,
        ["General admission 0"]
    );
    let door: Option<String> =
        sqlx::query_scalar("SELECT redeemed_door FROM tickets WHERE code = $1")
            .bind(&code)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(door.as_deref(), Some("Main entrance"));
    screenshot(&staff, "door").await;
    publish_screenshots(&["door"]);

    scan("already_redeemed").await;
    assert_eq!(
        texts(&staff, "#scan-result .verdict").await,
        ["✗ Do not let in"]
    );
    let redeemed: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tickets WHERE redeemed_at IS NOT NULL")
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(redeemed, 1);
    staff.close().await.unwrap();
}

/// Issue 13, a held sale in a real browser: the buyer buys, lands on the
/// held order (no tickets yet), the confirmation mail arrives at a real SMTP
/// server on loopback (`common::smtp`), and its link, opened in the browser,
/// leads to a button that confirms the order and shows its tickets.
#[sqlx::test]
async fn a_buyer_confirms_a_held_order_from_the_mail_in_a_real_browser(pool: PgPool) {
    let driver = Chromedriver::start().await;
    let sink = common::smtp::Sink::start().await;
    let fixture = common::published_event(&pool, &[common::TicketSpec::new(5, 2, 2)]).await;
    sqlx::query("UPDATE events SET hold_seconds = 600 WHERE id = $1")
        .bind(fixture.event_id)
        .execute(&pool)
        .await
        .unwrap();
    let key = ConfirmKey::random();
    let clock = ManualClock::new(common::now());
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_confirm_key(key.clone());
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let settings = MailSettings::new(
        Some(sink.url()),
        "Stampede <tickets@example.org>",
        &app.url(""),
    )
    .unwrap();
    let mailer = stampede::mail::spawn(pool.clone(), key, settings).unwrap();

    let buyer = driver.browser().await;
    buyer
        .goto(&app.url(&format!("/events/{}", fixture.event_id)))
        .await
        .unwrap();
    fill_buy_form(
        &buyer,
        fixture.ticket_type_id(),
        "2",
        "held.buyer@example.org",
    )
    .await;
    click(&buyer, "form.buy button[type=submit]").await;
    let path = wait_for_path(&buyer, "the held order", |p| p.starts_with("/orders/")).await;
    let order = order_id(&path);
    assert_eq!(texts(&buyer, "main h1").await, ["2 tickets held for you"]);
    assert!(
        buyer.find(Locator::Css("ol.tickets")).await.is_err(),
        "a held order shows no ticket"
    );
    assert_eq!(order_status(&pool, order).await, "held");
    assert_eq!(ticket_count(&pool).await, 0);
    // static/app.js counts the ten minutes down against the server's clock.
    let left = until(&buyer, "the countdown", || async {
        let shown = texts(&buyer, ".time-left").await;
        shown.first().filter(|t| t.ends_with("left)")).cloned()
    })
    .await;
    assert!(left.starts_with("(9:") || left == "(10:00 left)", "{left}");
    screenshot(&buyer, "held-order").await;

    let mails = sink.wait_for(1, WAIT).await;
    assert_eq!(mails.len(), 1, "the confirmation mail arrives");
    assert_eq!(mails[0].to, ["held.buyer@example.org"]);
    let link = mails[0]
        .line_starting(&app.url("/orders/"))
        .expect("the mail carries the link");
    // The link opens a page that changes nothing (mail scanners fetch
    // links too); its button confirms.
    buyer.goto(&link).await.unwrap();
    assert_eq!(texts(&buyer, "main h1").await, ["Confirm your tickets"]);
    assert_eq!(order_status(&pool, order).await, "held");
    click(&buyer, "main form button[type=submit]").await;
    let confirmed = format!("/orders/{order}");
    wait_for_path(&buyer, "the confirmed order", |p| p == confirmed).await;
    assert_eq!(texts(&buyer, "main h1").await, ["You have 2 tickets"]);
    check_tickets(&buyer, &pool, order, 2).await;
    assert_eq!(order_status(&pool, order).await, "confirmed");
    mailer.abort();
    buyer.close().await.unwrap();
}

/// id, name, price_minor, currency, capacity, remaining, max_per_order, max_per_buyer.
type TicketTypeRow = (Uuid, String, i64, String, i32, i32, i32, i32);

// ---------------------------------------------------------------------------
// The buyer's form and order page.

fn radio(ticket_type: Uuid) -> String {
    format!("form.buy input[name=ticket_type_id][value='{ticket_type}']")
}

async fn fill_buy_form(c: &Client, ticket_type: Uuid, quantity: &str, email: &str) {
    click(c, &radio(ticket_type)).await;
    type_into(c, "#quantity", quantity).await;
    type_into(c, "#email", email).await;
}

fn order_id(path: &str) -> Uuid {
    Uuid::parse_str(path.trim_start_matches("/orders/")).unwrap()
}

/// The order page lists one QR code per ticket, each an inline SVG image
/// that the browser decodes (the CSP allows `data:` images), next to its
/// code; the codes are the order's rows in `tickets`. Returns the codes.
async fn check_tickets(c: &Client, pool: &PgPool, order_id: Uuid, quantity: usize) -> Vec<String> {
    find(c, "ol.tickets").await;
    let images = c
        .find_all(Locator::Css("ol.tickets li.ticket img"))
        .await
        .unwrap();
    assert_eq!(images.len(), quantity, "one QR code per ticket");
    for image in &images {
        let src = image.attr("src").await.unwrap().unwrap_or_default();
        assert!(
            src.starts_with("data:image/svg+xml"),
            "a QR code is an inline SVG: {}",
            &src[..src.len().min(40)]
        );
    }
    let decoded = c
        .execute_async(
            "const done = arguments[arguments.length - 1];
             const images = [...document.querySelectorAll('ol.tickets li.ticket img')];
             Promise.all(images.map((i) => i.decode()))
               .then(() => done(images.map((i) => i.naturalWidth)))
               .catch((e) => done(String(e)));",
            vec![],
        )
        .await
        .unwrap();
    let widths = decoded
        .as_array()
        .unwrap_or_else(|| panic!("a QR code failed to load: {decoded}"));
    assert!(
        widths.iter().all(|w| w.as_u64().unwrap_or(0) >= 160),
        "QR codes render at 160px or more: {widths:?}"
    );
    // Codes are shown in groups of four for reading out at the door.
    let shown: Vec<String> = texts(c, "ol.tickets code.ticket-code")
        .await
        .iter()
        .map(|code| code.replace(' ', ""))
        .collect();
    let stored = ticket_codes(pool, order_id).await;
    assert_eq!(
        shown, stored,
        "the page shows the order's tickets, in order"
    );
    let positions: Vec<i32> =
        sqlx::query_scalar("SELECT position FROM tickets WHERE order_id = $1 ORDER BY position")
            .bind(order_id)
            .fetch_all(pool)
            .await
            .unwrap();
    assert_eq!(positions, (1..=quantity as i32).collect::<Vec<_>>());
    stored
}

async fn ticket_count(pool: &PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM tickets")
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The countdown of static/app.js, on a page opened before the sale, with
/// the server's clock (the app's `ManualClock`) a day ahead of the
/// browser's: it counts down from the server's time, reloads once after the
/// opening (after its jitter of 250 ms to 2 s), shows the buy form after the
/// reload, and does not reload again.
#[sqlx::test]
async fn the_countdown_follows_the_server_clock_and_reloads_once_into_the_buy_form(pool: PgPool) {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn(pool.clone()).await;
    let opens = (time::OffsetDateTime::now_utc() + Span::days(1))
        .replace_nanosecond(0)
        .unwrap();
    let fixture = common::event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[common::TicketSpec::new(10, 2, 2)],
    )
    .await;
    app.clock.set(opens - Span::seconds(8));
    let buyer = driver.browser().await;
    let page = format!("/events/{}", fixture.event_id);
    buyer.goto(&app.url(&page)).await.unwrap();
    wait_for_path(&buyer, "the event page before the sale", |p| p == page).await;
    // Mark this document, and note (in sessionStorage, which outlives a
    // reload) when the countdown reaches zero.
    buyer
        .execute(
            r#"window.stampedeFirstLoad = true;
               const countdown = document.getElementById("countdown");
               new MutationObserver(() => {
                 if (countdown.textContent.startsWith("The sale is open") && !sessionStorage.zeroAt) {
                   sessionStorage.zeroAt = String(performance.timeOrigin + performance.now());
                 }
               }).observe(countdown, { childList: true, characterData: true, subtree: true });"#,
            vec![],
        )
        .await
        .unwrap();
    let counting = texts(&buyer, "#countdown").await.join(" ");
    // From the server's clock: seconds. From the browser's it would be a day.
    assert!(counting.contains("Opens in 00:00:0"), "{counting}");
    assert!(!counting.contains("1d"), "{counting}");
    assert!(
        texts(&buyer, "input[name=quantity]").await.is_empty(),
        "a buy form before the sale"
    );

    // The sale opens on the server; the browser finds out by its countdown.
    app.clock.set(opens);
    find(&buyer, "input[name=quantity]").await;
    let reloaded = buyer
        .execute(
            "return [window.stampedeFirstLoad === true, Number(sessionStorage.zeroAt), performance.timeOrigin];",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(reloaded[0], false, "the buy form came without a reload");
    let delay = reloaded[2].as_f64().unwrap() - reloaded[1].as_f64().unwrap();
    eprintln!("the countdown reached zero; the page reloaded {delay:.0} ms later");
    assert!(
        delay >= 250.0,
        "reloaded {delay} ms after zero, before the jitter's least"
    );
    assert!(texts(&buyer, "#countdown").await.is_empty());

    // No second reload: this document is still the one shown after longer
    // than the longest jitter.
    buyer
        .execute("window.stampedeReloaded = true;", vec![])
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let same = buyer
        .execute("return window.stampedeReloaded === true;", vec![])
        .await
        .unwrap();
    assert_eq!(same, true, "the page reloaded again");
}

/// An event in Berlin, read by a browser in New York: the page says the
/// Berlin time with its abbreviation (from the server), and the script adds
/// the reader's own local time; both name the same instant.
#[sqlx::test]
async fn a_reader_in_another_zone_sees_the_event_time_and_their_own(pool: PgPool) {
    let driver = Chromedriver::start_in_zone(Some("America/New_York")).await;
    let app = TestApp::spawn(pool.clone()).await;
    let fixture = common::event_with_window(
        &pool,
        time::OffsetDateTime::now_utc() - Span::minutes(5),
        None,
        "published",
        &[common::TicketSpec::new(10, 2, 2)],
    )
    .await;
    let starts_at: time::OffsetDateTime = sqlx::query_scalar(
        "UPDATE events SET time_zone = 'Europe/Berlin' WHERE id = $1 RETURNING starts_at",
    )
    .bind(fixture.event_id)
    .fetch_one(&pool)
    .await
    .unwrap();
    let instant = jiff::Timestamp::from_nanosecond(starts_at.unix_timestamp_nanos()).unwrap();
    let in_zone = |zone: &str, format: &str| {
        instant
            .to_zoned(jiff::tz::TimeZone::get(zone).unwrap())
            .strftime(format)
            .to_string()
    };
    let buyer = driver.browser().await;
    let page = format!("/events/{}", fixture.event_id);
    buyer.goto(&app.url(&page)).await.unwrap();
    wait_for_path(&buyer, "the event page", |p| p == page).await;
    let meta = texts(&buyer, "article.event p.meta").await.join(" ");
    // The server's words: Berlin's local time, labeled (CET or CEST).
    let berlin = in_zone("Europe/Berlin", "%H:%M %Z");
    assert!(meta.contains(&berlin), "{berlin} not in {meta:?}");
    // The browser's: New York's, in its locale's 12-hour clock.
    let reader = texts(&buyer, "article.event p.meta .reader-time")
        .await
        .join(" ");
    let new_york = in_zone("America/New_York", "%I:%M %p");
    assert!(reader.contains(&new_york), "{new_york} not in {reader:?}");
    let abbreviation = in_zone("America/New_York", "%Z");
    assert!(
        reader.contains(&abbreviation) && reader.contains("your time"),
        "{reader:?}"
    );
    screenshot(&buyer, "event-in-its-own-time").await;
}

/// The waiting room in a real browser: a buyer joins the pre-queue (the Web
/// Worker solves the challenge), a second tab of the same browser gets the
/// same place, the place falls as others are let in (the page refreshes
/// itself), and once admitted the buyer buys.
#[sqlx::test]
async fn a_buyer_joins_the_waiting_room_waits_is_admitted_and_buys_in_a_real_browser(pool: PgPool) {
    use stampede::{
        AppState,
        domain::EventId,
        waiting_room::{self, RoomKey, RoomSettings, Rooms},
    };
    let driver = Chromedriver::start().await;
    let opens = (time::OffsetDateTime::now_utc() + Span::minutes(10))
        .replace_nanosecond(0)
        .unwrap();
    let clock = ManualClock::new(opens - Span::minutes(5));
    // A real (if small) proof of work: 2^12 hashes for the worker.
    let rooms = Rooms::new(RoomKey::random(), 10).with_proof_bits(12);
    let state = AppState::new(pool.clone())
        .with_clock(clock.clone())
        .with_list_cache_ttl(Duration::ZERO)
        .with_rooms(rooms.clone());
    let app = TestApp::spawn_state(pool.clone(), clock, state).await;
    let fixture = common::event_with_window(
        &pool,
        opens,
        None,
        "published",
        &[common::TicketSpec::new(10, 2, 2)],
    )
    .await;
    let event_id = EventId::from(fixture.event_id);
    let tt = fixture.ticket_type_id();
    waiting_room::save(
        &pool,
        event_id,
        &RoomSettings {
            enabled: true,
            admit_per_minute: Some(60),
            ..RoomSettings::default()
        },
    )
    .await
    .unwrap();
    // Three others in the pre-queue, joined through the library.
    let before = app.clock.now();
    for _ in 0..3 {
        let challenge = rooms.challenge(event_id, before);
        let proof = waiting_room::solve(&challenge.token, challenge.bits);
        waiting_room::join(&pool, &rooms, event_id, None, Some(&proof), None, before)
            .await
            .unwrap();
    }

    // Two tabs of one browser on the event page, both with the join button.
    let buyer = driver.browser().await;
    let page = format!("/events/{event_id}");
    buyer.goto(&app.url(&page)).await.unwrap();
    wait_for_path(&buyer, "the queued event page", |p| p == page).await;
    find(&buyer, "form.join button[type=submit]").await;
    assert!(
        texts(&buyer, &radio(tt)).await.is_empty(),
        "no buy form before a turn"
    );
    let first_tab = buyer.window().await.unwrap();
    let second_tab = buyer.new_window(true).await.unwrap().handle;
    buyer.switch_to_window(second_tab.clone()).await.unwrap();
    buyer.goto(&app.url(&page)).await.unwrap();
    find(&buyer, "form.join button[type=submit]").await;

    // The first tab joins: the worker solves, the form goes with the proof.
    buyer.switch_to_window(first_tab.clone()).await.unwrap();
    click(&buyer, "form.join button[type=submit]").await;
    let queue = format!("/events/{event_id}/queue");
    wait_for_path(&buyer, "the position page", |p| p == queue).await;
    let prequeue = texts(&buyer, "p.place").await.join(" ");
    assert!(prequeue.contains("You are in the pre-queue"), "{prequeue}");
    let (entry, salt): (Uuid, Option<Vec<u8>>) = sqlx::query_as(
        "SELECT id, proof_salt FROM queue_entries WHERE event_id = $1 ORDER BY seq DESC LIMIT 1",
    )
    .bind(event_id.get())
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(
        salt.map(|s| s.len()),
        Some(16),
        "joined with a solved proof"
    );

    // The second tab, still showing the join button, joins too: the same place.
    buyer.switch_to_window(second_tab).await.unwrap();
    click(&buyer, "form.join button[type=submit]").await;
    wait_for_path(&buyer, "the position page in the second tab", |p| {
        p == queue
    })
    .await;
    let entries: i64 = sqlx::query_scalar("SELECT count(*) FROM queue_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(entries, 4, "the second tab got no second place");
    buyer.close_window().await.unwrap();
    buyer.switch_to_window(first_tab).await.unwrap();

    // So that this buyer is last and sees their place fall, the test picks
    // the seed (before the shuffle, as nobody else can) that puts them there.
    let ids: Vec<Uuid> = sqlx::query_scalar("SELECT id FROM queue_entries")
        .fetch_all(&pool)
        .await
        .unwrap();
    let seed = std::iter::repeat_with(rand::random::<[u8; 32]>)
        .find(|seed| waiting_room::shuffle_order(seed, ids.clone()).last() == Some(&entry))
        .unwrap();
    sqlx::query("UPDATE waiting_rooms SET seed = $2 WHERE event_id = $1")
        .bind(event_id.get())
        .bind(&seed[..])
        .execute(&pool)
        .await
        .unwrap();

    // The opening: shuffled, nobody in yet; then one a second (60 a minute).
    app.clock.set(opens);
    assert_eq!(waiting_room::tick(&pool, opens).await.unwrap(), Some(0));
    buyer.refresh().await.unwrap();
    let place = |c: &Client| {
        let c = c.clone();
        async move {
            // The page's meta refresh may reload it mid-read: poll again.
            let shown = texts_unless_reloading(&c, "p.place strong").await.ok()?;
            shown.first().and_then(|t| t.parse::<i64>().ok())
        }
    };
    let mut shown = until(&buyer, "a place after the shuffle", || place(&buyer)).await;
    assert_eq!(shown, 4);
    screenshot(&buyer, "queue").await;
    for second in 1..=3 {
        let at = opens + Span::seconds(second);
        app.clock.set(at);
        assert_eq!(waiting_room::tick(&pool, at).await.unwrap(), Some(1));
        // The page refreshes itself (a meta refresh every 5-9 s).
        let now_shown = until(&buyer, "the place to fall", || {
            let buyer = buyer.clone();
            async move { place(&buyer).await.filter(|p| *p < shown) }
        })
        .await;
        assert_eq!(now_shown, shown - 1);
        shown = now_shown;
    }
    assert_eq!(shown, 1);

    // Admitted: the page says so and leads to the tickets; the buyer buys.
    let at = opens + Span::seconds(4);
    app.clock.set(at);
    assert_eq!(waiting_room::tick(&pool, at).await.unwrap(), Some(1));
    buyer.refresh().await.unwrap();
    let turn = texts(&buyer, "main p.notice").await.join(" ");
    assert!(turn.contains("It is your turn"), "{turn}");
    click(&buyer, "main a.button").await;
    wait_for_path(&buyer, "the event page with the pass", |p| p == page).await;
    fill_buy_form(&buyer, tt, "1", "fan@example.org").await;
    click(&buyer, "form.buy button[type=submit]").await;
    let order_path = wait_for_path(&buyer, "the order page", |p| p.starts_with("/orders/")).await;
    let spent: Option<Uuid> = sqlx::query_scalar("SELECT queue_entry_id FROM orders WHERE id = $1")
        .bind(order_id(&order_path))
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(spent, Some(entry), "the order spent this buyer's pass");
    publish_screenshots(&["queue"]);
}

// ---------------------------------------------------------------------------
// Browser helpers. Every wait is bounded by WAIT and fails with what the
// browser shows at that moment.

/// The element, once it is on the page.
async fn find(c: &Client, css: &str) -> Element {
    match c
        .wait()
        .at_most(WAIT)
        .every(POLL)
        .for_element(Locator::Css(css))
        .await
    {
        Ok(element) => element,
        Err(err) => panic!("waited for {css}: {err}\n{}", where_we_are(c).await),
    }
}

async fn click(c: &Client, css: &str) {
    find(c, css).await.click().await.unwrap();
}

/// Type like a person, into an emptied field.
async fn type_into(c: &Client, css: &str, text: &str) {
    let field = find(c, css).await;
    field.clear().await.unwrap();
    field.send_keys(text).await.unwrap();
}

async fn set_value(c: &Client, css: &str, value: &str) {
    find(c, css).await;
    c.execute(
        "document.querySelector(arguments[0]).value = arguments[1];",
        vec![json!(css), json!(value)],
    )
    .await
    .unwrap();
    assert_eq!(self::value(c, css).await, value, "{css} took the value");
}

async fn value(c: &Client, css: &str) -> String {
    find(c, css)
        .await
        .prop("value")
        .await
        .unwrap()
        .unwrap_or_default()
}

/// Open the event page until its ticket types read `expected`: the stock it
/// shows may be up to a second old (`web::event_cache::FRESH_FOR`), so a
/// page opened right after a sale may not count it yet.
async fn event_page_showing(c: &Client, url: &str, expected: &[&str]) {
    let started = Instant::now();
    loop {
        c.goto(url).await.unwrap();
        let shown = texts(c, ".ticket-type").await;
        if shown == expected || started.elapsed() > WAIT {
            assert_eq!(shown, expected);
            return;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The visible text of every match, whitespace collapsed.
async fn texts(c: &Client, css: &str) -> Vec<String> {
    texts_unless_reloading(c, css).await.unwrap()
}

/// [`texts`], or the WebDriver error when the page went away between
/// finding an element and reading it (a page that reloads itself: poll
/// again).
async fn texts_unless_reloading(
    c: &Client,
    css: &str,
) -> Result<Vec<String>, fantoccini::error::CmdError> {
    let mut out = Vec::new();
    for element in c.find_all(Locator::Css(css)).await? {
        let text = element.text().await?;
        out.push(text.split_whitespace().collect::<Vec<_>>().join(" "));
    }
    Ok(out)
}

/// The text of the dialog (confirm) the page opened.
async fn alert_text(c: &Client) -> String {
    until(c, "a dialog", || async { c.get_alert_text().await.ok() }).await
}

/// Wait until the page's path satisfies `ok` (a navigation finished), and
/// until the new document has loaded; returns the path.
async fn wait_for_path(c: &Client, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let ok = &ok;
    let path = until(c, what, || async move {
        let url = c.current_url().await.ok()?;
        let path = url.path().to_owned();
        let ready = c
            .execute("return document.readyState;", vec![])
            .await
            .ok()?;
        (ok(&path) && ready == "complete").then_some(path)
    })
    .await;
    assert_not_an_error_page(c, what).await;
    path
}

/// The headings of the app's error page (`views::error_page`).
const ERROR_HEADINGS: [&str; 4] = [
    "Not found",
    "Something went wrong",
    "That did not work",
    "Busy",
];

async fn assert_not_an_error_page(c: &Client, what: &str) {
    let heading = c
        .execute(
            "const h = document.querySelector('main h1'); return h ? h.textContent.trim() : '';",
            vec![],
        )
        .await
        .unwrap();
    let heading = heading.as_str().unwrap_or_default();
    assert!(
        !ERROR_HEADINGS.contains(&heading),
        "{what}: the browser shows an error page\n{}",
        where_we_are(c).await
    );
}

/// Re-check `check` every POLL until it yields a value, for at most WAIT.
async fn until<T, F, Fut>(c: &Client, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        if Instant::now() > deadline {
            panic!("waited {WAIT:?} for {what}\n{}", where_we_are(c).await);
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The URL and the start of the visible text, for failure messages.
async fn where_we_are(c: &Client) -> String {
    let url = c
        .current_url()
        .await
        .map(|u| u.to_string())
        .unwrap_or_default();
    let body = c
        .execute(
            "return document.body ? document.body.innerText : '';",
            vec![],
        )
        .await
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_default();
    let body: String = body.chars().take(2000).collect();
    format!("browser at {url}, showing:\n{body}")
}

// ---------------------------------------------------------------------------
// Screenshots.

fn screenshot_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("target/screenshots")
}

/// A PNG of the whole page, 1280 pixels wide, as target/screenshots/NAME.png.
async fn screenshot(c: &Client, name: &str) {
    let (width, height) = c.get_window_size().await.unwrap();
    let size = c
        .execute(
            "return [document.documentElement.scrollHeight, window.outerHeight - window.innerHeight];",
            vec![],
        )
        .await
        .unwrap();
    let page = size[0].as_u64().unwrap();
    let frame = size[1].as_u64().unwrap();
    let full = (page + frame).clamp(height, 6000);
    c.set_window_size(width as u32, full as u32).await.unwrap();
    let png = c.screenshot().await.unwrap();
    c.set_window_size(width as u32, height as u32)
        .await
        .unwrap();
    assert!(png.starts_with(b"\x89PNG"), "a PNG screenshot");
    let dir = screenshot_dir();
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.png"));
    std::fs::write(&path, png).unwrap();
    eprintln!("screenshot: {}", path.display());
}

/// With STAMPEDE_UPDATE_SCREENSHOTS=1, copy the screenshots the docs show.
fn publish_screenshots(names: &[&str]) {
    if std::env::var("STAMPEDE_UPDATE_SCREENSHOTS").as_deref() != Ok("1") {
        return;
    }
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/screenshots");
    std::fs::create_dir_all(&docs).unwrap();
    for name in names {
        let to = docs.join(format!("{name}.png"));
        std::fs::copy(screenshot_dir().join(format!("{name}.png")), &to).unwrap();
        eprintln!("updated {}", to.display());
    }
}

// ---------------------------------------------------------------------------
// chromedriver and Chromium.

/// A chromedriver on a free loopback port, in a process group of its own
/// with the Chromium processes it starts; dropping it stops them all.
struct Chromedriver {
    child: Child,
    url: String,
    /// Profiles (one per browser session) and the chromedriver log.
    dir: PathBuf,
    sessions: AtomicUsize,
}

impl Chromedriver {
    async fn start() -> Self {
        Self::start_in_zone(None).await
    }

    /// With `TZ` set for the driver and the browsers it starts: a reader
    /// in that time zone.
    async fn start_in_zone(zone: Option<&str>) -> Self {
        for path in [CHROMEDRIVER, CHROMIUM] {
            assert!(
                Path::new(path).exists(),
                "{path} is missing. The browser test needs Debian's chromium and chromium-driver: \
                 run `apt-get install -y chromium chromium-driver` (./scripts/test does this \
                 when it runs as root or can sudo)."
            );
        }
        let dir = std::env::temp_dir().join(format!("stampede-browser-{}", Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        // A port the system just handed out and took back: free for the driver.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut command = Command::new(CHROMEDRIVER);
        if let Some(zone) = zone {
            command.env("TZ", zone);
        }
        let child = command
            .arg(format!("--port={port}"))
            .arg(format!(
                "--log-path={}",
                dir.join("chromedriver.log").display()
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {CHROMEDRIVER}: {e}"));
        let mut driver = Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            dir,
            sessions: AtomicUsize::new(0),
        };
        driver.wait_until_ready().await;
        driver
    }

    /// Poll /status until chromedriver answers ready, for at most WAIT.
    async fn wait_until_ready(&mut self) {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .no_proxy()
            .build()
            .unwrap();
        let deadline = Instant::now() + WAIT;
        loop {
            if let Ok(response) = http.get(format!("{}/status", self.url)).send().await
                && let Ok(status) = response.json::<Value>().await
                && status["value"]["ready"] == true
            {
                return;
            }
            if let Ok(Some(exit)) = self.child.try_wait() {
                panic!(
                    "chromedriver exited ({exit}) before answering\n{}",
                    self.log()
                );
            }
            if Instant::now() > deadline {
                panic!(
                    "chromedriver did not answer at {} within {WAIT:?}\n{}",
                    self.url,
                    self.log()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A new headless Chromium session with a fresh profile: its own cookies.
    async fn browser(&self) -> Client {
        let n = self.sessions.fetch_add(1, Ordering::Relaxed);
        let profile = self.dir.join(format!("profile-{n}"));
        let capabilities = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--window-size=1280,900",
                    // Belt and braces: no name resolves, so nothing but the
                    // app on 127.0.0.1 can be reached.
                    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
        });
        let Value::Object(capabilities) = capabilities else {
            unreachable!()
        };
        ClientBuilder::new(HttpConnector::new())
            .capabilities(capabilities)
            .connect(&self.url)
            .await
            .unwrap_or_else(|e| {
                panic!("chromedriver could not start Chromium: {e}\n{}", self.log())
            })
    }

    /// The end of chromedriver's log, for failure messages.
    fn log(&self) -> String {
        let log = std::fs::read_to_string(self.dir.join("chromedriver.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        format!(
            "chromedriver log ({}):\n{}",
            self.dir.display(),
            tail.join("\n")
        )
    }
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        // The process group is chromedriver's pid (process_group(0)); it
        // holds chromedriver and the Chromium processes it started.
        let group = format!("-{}", self.child.id());
        let signal = |name: &str| {
            let _ = Command::new("kill")
                .args([name, "--", &group])
                .stderr(Stdio::null())
                .status();
        };
        signal("-TERM");
        let deadline = Instant::now() + Duration::from_secs(3);
        while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
            std::thread::sleep(POLL);
        }
        // Whatever did not stop on TERM (a Chromium left by a panic).
        signal("-KILL");
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
