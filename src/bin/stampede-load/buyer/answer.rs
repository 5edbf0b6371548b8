//! Reading the server's answers: the CSRF cookie and hidden fields of a
//! page, and each answer reduced to an [`Outcome`] (sold, refused with its
//! reason, or failed).

use std::borrow::Cow;

use uuid::Uuid;

use super::Outcome;
use crate::http::Reply;

pub(super) const COOKIE: &str = "stampede_csrf";

/// `stampede_csrf=TOKEN` from the page's `Set-Cookie`.
pub(super) fn csrf_cookie(reply: &Reply) -> Option<String> {
    reply
        .headers("set-cookie")
        .iter()
        .filter_map(|v| v.split(';').next())
        .find(|pair| pair.split_once('=').is_some_and(|(name, _)| name == COOKIE))
        .map(str::to_owned)
}

/// The value of `<input type="hidden" name="NAME" value="…">` in a page.
pub fn hidden_field<'a>(html: &'a str, name: &str) -> Option<&'a str> {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker)? + marker.len();
    html[start..].split('"').next()
}

pub(super) fn expected(reply: &Reply, expect: u16) -> Outcome {
    if reply.status == expect {
        Outcome::Ok
    } else {
        refusal_or_failure(reply.status, "")
    }
}

/// 503 is the server shedding load on purpose; 429 a rate limit; any other
/// status that is not what the scenario expects is a failure.
pub(super) fn refusal_or_failure(status: u16, context: &str) -> Outcome {
    match status {
        503 => Outcome::Refused("overloaded".into()),
        429 => Outcome::Refused("rate_limited".into()),
        s if context.is_empty() => Outcome::Failed(format!("http_{s}").into()),
        s => Outcome::Failed(format!("{context}_http_{s}").into()),
    }
}

/// Error codes the API documents, kept without allocating.
const CODES: &[&str] = &[
    "sold_out",
    "not_enough_left",
    "limit_exceeded",
    "sale_not_open",
    "sale_closed",
    "not_found",
    "invalid",
    "idempotency_conflict",
    "rate_limited",
    "overloaded",
    "forbidden",
    "conflict",
];

fn reason(code: &str) -> Cow<'static, str> {
    CODES
        .iter()
        .find(|c| **c == code)
        .map_or_else(|| Cow::Owned(code.to_owned()), |c| Cow::Borrowed(*c))
}

#[derive(serde::Deserialize)]
struct Created<'a> {
    #[serde(borrow)]
    id: Option<&'a str>,
    #[serde(borrow)]
    error: Option<ErrorBody<'a>>,
}

#[derive(serde::Deserialize)]
struct ErrorBody<'a> {
    #[serde(borrow)]
    code: &'a str,
}

/// Our API's error bodies start so (serde_json's compact output of
/// `{"error": {"code": …}}`): the code is read without a parser, which
/// costs the load generator more than the server spends refusing.
const ERROR_PREFIX: &[u8] = br#"{"error":{"code":""#;

/// The error code of an error body in that shape; `None` for any other.
fn plain_error_code(body: &[u8]) -> Option<&str> {
    let rest = body.strip_prefix(ERROR_PREFIX)?;
    let end = rest.iter().position(|&b| b == b'"' || b == b'\\')?;
    (rest[end] == b'"')
        .then(|| std::str::from_utf8(&rest[..end]).ok())
        .flatten()
}

/// `201 {"id": …}` (or 200 for a replayed key), or `{"error": {"code"}}`.
pub(super) fn api_outcome(reply: &Reply) -> Outcome {
    let parsed = || serde_json::from_slice::<Created>(&reply.body).ok();
    match reply.status {
        200 | 201 => parsed()
            .and_then(|b| b.id)
            .and_then(|id| Uuid::parse_str(id).ok())
            .map_or(Outcome::Failed("no_order_id".into()), Outcome::Sold),
        400..=428 | 430..=499 => match plain_error_code(&reply.body) {
            Some(code) => Outcome::Refused(reason(code)),
            None => match parsed().and_then(|b| b.error) {
                Some(error) => Outcome::Refused(reason(error.code)),
                None => Outcome::Refused(format!("http_{}", reply.status).into()),
            },
        },
        _ => refusal_or_failure(reply.status, ""),
    }
}

/// `303 Location: /orders/{id}[?s=cancel secret]`, or the event page again
/// with the reason.
pub(super) fn form_outcome(reply: &Reply) -> Outcome {
    if reply.status == 303 {
        let id = reply.header("location").and_then(|v| {
            let path = v.strip_prefix("/orders/")?;
            let id = path.split_once('?').map_or(path, |(id, _)| id);
            Uuid::parse_str(id).ok()
        });
        return id.map_or(Outcome::Failed("no_order_id".into()), Outcome::Sold);
    }
    if !(400..500).contains(&reply.status) || reply.status == 429 {
        return refusal_or_failure(reply.status, "");
    }
    let html = String::from_utf8_lossy(&reply.body);
    let message = html
        .split_once("role=\"alert\"")
        .and_then(|(_, rest)| rest.split_once('>'))
        .map_or("", |(_, rest)| rest.split('<').next().unwrap_or(""));
    Outcome::Refused(form_reason(reply.status, message))
}

/// The page's message, mapped to the API's code for the same refusal.
fn form_reason(status: u16, message: &str) -> Cow<'static, str> {
    let prefixes = [
        ("Sold out", "sold_out"),
        ("Only ", "not_enough_left"),
        ("At most", "limit_exceeded"),
        ("Each buyer may hold", "limit_exceeded"),
        ("The sale has not opened", "sale_not_open"),
        ("The sale", "sale_closed"),
        ("This idempotency key", "idempotency_conflict"),
        ("This form has expired", "csrf_refused"),
    ];
    prefixes
        .iter()
        .find(|(prefix, _)| message.starts_with(prefix))
        .map_or_else(
            || Cow::Owned(format!("http_{status}")),
            |(_, code)| Cow::Borrowed(*code),
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(status: u16, headers: &[(&'static str, &str)], body: &str) -> Reply {
        let mut raw = format!("HTTP/1.1 {status} X\r\n");
        for (name, value) in headers {
            raw.push_str(&format!("{name}: {value}\r\n"));
        }
        raw.push_str(&format!("content-length: {}\r\n\r\n{body}", body.len()));
        Reply::from_raw(raw.as_bytes())
    }

    #[test]
    fn api_answers_become_sales_refusals_and_failures() {
        let id = Uuid::new_v4();
        let created = reply(201, &[], &format!(r#"{{"id":"{id}","quantity":2}}"#));
        assert_eq!(api_outcome(&created), Outcome::Sold(id));
        let refused = reply(409, &[], r#"{"error":{"code":"sold_out","message":"x"}}"#);
        assert_eq!(api_outcome(&refused), Outcome::Refused("sold_out".into()));
        // Another shape of error body is parsed.
        let spaced = reply(409, &[], r#"{ "error": { "code": "limit_exceeded" } }"#);
        assert_eq!(
            api_outcome(&spaced),
            Outcome::Refused("limit_exceeded".into())
        );
        let escaped = reply(409, &[], r#"{"error":{"code":"a\"b"}}"#);
        // Not cut short at the backslash (and a code that would need an
        // escape is none of ours).
        assert_eq!(api_outcome(&escaped), Outcome::Refused("http_409".into()));
        assert_eq!(
            api_outcome(&reply(404, &[], "not json")),
            Outcome::Refused("http_404".into())
        );
        assert_eq!(
            api_outcome(&reply(503, &[], "busy")),
            Outcome::Refused("overloaded".into())
        );
        assert_eq!(
            api_outcome(&reply(500, &[], "{}")),
            Outcome::Failed("http_500".into())
        );
    }

    #[test]
    fn form_answers_are_read_from_the_redirect_or_the_alert() {
        let id = Uuid::new_v4();
        let sold = reply(303, &[("location", &format!("/orders/{id}"))], "");
        assert_eq!(form_outcome(&sold), Outcome::Sold(id));
        let with_secret = format!("/orders/{id}?s=AbC-_0123456789abcdefghijklmnopqrstuvwxyzABCD");
        let sold = reply(303, &[("location", &with_secret)], "");
        assert_eq!(form_outcome(&sold), Outcome::Sold(id));
        let page = r#"<p class="notice error" role="alert" id="form-error">Only 2 left of this ticket type; choose fewer.</p>"#;
        assert_eq!(
            form_outcome(&reply(409, &[], page)),
            Outcome::Refused("not_enough_left".into())
        );
    }

    #[test]
    fn the_csrf_cookie_and_hidden_fields_are_found() {
        let page = reply(
            200,
            &[
                ("set-cookie", "other=1; Path=/"),
                ("set-cookie", "stampede_csrf=abc; Path=/; HttpOnly"),
            ],
            r#"<input type="hidden" name="idempotency_key" value="k-1">"#,
        );
        assert_eq!(csrf_cookie(&page).as_deref(), Some("stampede_csrf=abc"));
        let html = String::from_utf8_lossy(&page.body);
        assert_eq!(hidden_field(&html, "idempotency_key"), Some("k-1"));
        assert_eq!(hidden_field(&html, "csrf_token"), None);
    }
}
