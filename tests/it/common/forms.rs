//! Form bodies as a browser sends them (urlencoded by `form_urlencoded`,
//! the CSRF field named by `stampede::web::csrf::FIELD`), and the organizer's
//! event forms.

use stampede::web::csrf;
use time::Duration as Span;
use uuid::Uuid;

use super::{TestApp, form_time, organizer::opened};

/// A CSRF token for form posts: the cookie and the hidden field must match
/// (see `stampede::web::csrf`); a test may mint its own pair.
pub const CSRF_TOKEN: &str = "test-csrf-token-0123456789abcdefghijklmnopq";

pub fn csrf_cookie() -> String {
    format!("{}={CSRF_TOKEN}", csrf::COOKIE)
}

/// Urlencoded `name=value` pairs joined by `&`.
pub fn urlencoded(fields: &[(&str, &str)]) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .finish()
}

/// An urlencoded form body with the CSRF field `token` added.
pub fn with_csrf(fields: &[(&str, &str)], token: &str) -> String {
    form_urlencoded::Serializer::new(String::new())
        .extend_pairs(fields)
        .append_pair(csrf::FIELD, token)
        .finish()
}

/// An urlencoded form body with the test CSRF field added.
pub fn form_body(fields: &[(&str, &str)]) -> String {
    with_csrf(fields, CSRF_TOKEN)
}

/// One name or value, urlencoded.
pub fn encode(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A form's fields, owned, so that tests can change one and post it.
pub type Fields = Vec<(String, String)>;

pub fn owned_fields(fields: &[(&str, &str)]) -> Fields {
    fields
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

pub fn borrowed(fields: &Fields) -> Vec<(&str, &str)> {
    fields
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect()
}

/// The same fields with `name` set to `value` (which must be there).
pub fn with(fields: &Fields, name: &str, value: &str) -> Fields {
    let mut out = fields.clone();
    match out.iter_mut().find(|(key, _)| key == name) {
        Some(field) => field.1 = value.to_owned(),
        None => panic!("no field {name} in the form"),
    }
    out
}

pub fn without(fields: &Fields, name: &str) -> Fields {
    fields
        .iter()
        .filter(|(key, _)| key != name)
        .cloned()
        .collect()
}

/// A complete, valid organizer form for a new, published event with one
/// ticket type and a blank row, as the form always carries some.
pub fn new_event_form(title: &str) -> Fields {
    owned_fields(&[
        ("title", title),
        ("venue", "Main hall"),
        ("description", "An evening of tests."),
        ("starts_at", "2030-03-01T19:30"),
        ("sale_opens_at", "2020-01-01T10:00"),
        ("sale_closes_at", ""),
        ("status", "published"),
        ("max_per_buyer", ""),
        ("payment", "offline"),
        ("time_zone", ""),
        ("tt_name_0", "Standing"),
        ("tt_price_0", "25.00"),
        ("tt_currency_0", "EUR"),
        ("tt_capacity_0", "120"),
        ("tt_max_per_order_0", "4"),
        ("tt_max_per_buyer_0", "6"),
        ("tt_name_1", ""),
        ("tt_price_1", ""),
        ("tt_currency_1", "EUR"),
        ("tt_capacity_1", ""),
        ("tt_max_per_order_1", ""),
        ("tt_max_per_buyer_1", ""),
    ])
}

/// The edit form of an event made by `organizer::owned_event` with one
/// ticket type, as the edit page fills it in.
pub fn edit_form(ticket_type_id: Uuid, title: &str, capacity: &str) -> Fields {
    let opens = opened();
    owned_fields(&[
        ("title", title),
        ("venue", "Test hall"),
        ("description", "A test event"),
        ("starts_at", &form_time(opens + Span::days(30))),
        ("sale_opens_at", &form_time(opens)),
        ("sale_closes_at", ""),
        ("payment", "offline"),
        ("tt_id_0", &ticket_type_id.to_string()),
        ("tt_name_0", "General admission 0"),
        ("tt_price_0", "25.00"),
        ("tt_currency_0", "EUR"),
        ("tt_capacity_0", capacity),
        ("tt_max_per_order_0", "4"),
        ("tt_max_per_buyer_0", "8"),
    ])
}

/// A page form post with a hand-written body (plus the CSRF cookie and field).
pub async fn post_raw_form(app: &TestApp, path: &str, body: String) -> reqwest::Response {
    app.client
        .post(app.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", csrf_cookie())
        .body(format!("{body}&{}", form_body(&[])))
        .send()
        .await
        .unwrap()
}

/// A form post from a browser without a cookie jar: the CSRF cookie plus
/// any other cookies given, and the CSRF field.
pub async fn post_with_cookies(
    app: &TestApp,
    path: &str,
    fields: &[(&str, &str)],
    cookies: &[(&str, &str)],
) -> reqwest::Response {
    let mut cookie = csrf_cookie();
    for (name, value) in cookies {
        cookie.push_str(&format!("; {name}={value}"));
    }
    app.client
        .post(app.url(path))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("cookie", cookie)
        .body(form_body(fields))
        .send()
        .await
        .unwrap()
}
