//! Request extractors whose rejections speak our error format.

use axum::{
    Form,
    body::Bytes,
    extract::{FromRequest, Request},
    http::request::Parts,
    http::{StatusCode, header},
};
use serde::de::DeserializeOwned;
use uuid::Uuid;

use super::{admission::ReadBody, error::ApiError};
use crate::{
    domain::{CancelSecret, ConfirmToken, InvalidField, OrderId},
    error::AppError,
};

/// A JSON body; a bad one is answered with the field it got wrong.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(mut req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let is_json = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.starts_with("application/json"));
        if !is_json {
            return Err(AppError::BadRequest(
                "Send a JSON body with Content-Type: application/json.".into(),
            )
            .into());
        }
        // Admission has read the body already: reading it again through
        // axum's extractor cost a sold-out refusal ~800 instructions more
        // (`scripts/cg-refusal`). Without admission, read it here.
        let bytes = match req.extensions_mut().remove::<ReadBody>() {
            Some(ReadBody(bytes)) => bytes,
            None => Bytes::from_request(req, state)
                .await
                .map_err(|r| body_rejected(r.status(), r.body_text()))?,
        };
        // serde reads a struct from an array too (`[null, null]` as its
        // fields in order); every API body is an object.
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) != Some(&b'{') {
            return Err(AppError::BadRequest("Send a JSON object as the body.".into()).into());
        }
        // Most bodies are valid: parsed once, untracked. One that fails is
        // parsed again with its path tracked, for a message naming the field.
        if let Ok(value) = serde_json::from_slice(&bytes) {
            return Ok(Self(value));
        }
        let mut deserializer = serde_json::Deserializer::from_slice(&bytes);
        let value = serde_path_to_error::deserialize(&mut deserializer).map_err(json_error)?;
        deserializer
            .end()
            .map_err(|err| AppError::BadRequest(format!("Malformed JSON: {err}")))?;
        Ok(Self(value))
    }
}

/// A body axum could not read: too large (413), or malformed (400).
fn body_rejected(status: StatusCode, text: String) -> AppError {
    if status == StatusCode::PAYLOAD_TOO_LARGE {
        AppError::PayloadTooLarge
    } else {
        AppError::BadRequest(text)
    }
}

fn json_error(err: serde_path_to_error::Error<serde_json::Error>) -> AppError {
    let path = err.path().to_string();
    let inner = err.into_inner();
    if inner.is_syntax() || inner.is_eof() {
        return AppError::BadRequest(format!("Malformed JSON: {inner}"));
    }
    let message = inner.to_string();
    // serde reports a missing field at its parent's path; name the field.
    let field = match message
        .strip_prefix("missing field `")
        .and_then(|rest| rest.split_once('`'))
    {
        Some((missing, _)) if path == "." => missing.to_owned(),
        Some((missing, _)) => format!("{path}.{missing}"),
        None => path,
    };
    let message = message
        .split(" at line ")
        .next()
        .unwrap_or_default()
        .to_owned();
    AppError::Invalid(InvalidField::new(field, message))
}

/// An urlencoded form as name/value pairs, for forms that must come back
/// filled in when a field is wrong.
pub struct FormFields(pub Vec<(String, String)>);

impl FormFields {
    pub fn get(&self, name: &str) -> &str {
        self.0
            .iter()
            .find(|(key, _)| key == name)
            .map_or("", |(_, value)| value.as_str())
    }
}

impl<S: Send + Sync> FromRequest<S> for FormFields {
    type Rejection = AppError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let Form(fields) = Form::<Vec<(String, String)>>::from_request(req, state)
            .await
            .map_err(|r| body_rejected(r.status(), r.body_text()))?;
        Ok(Self(fields))
    }
}

/// The order's proof from a query (`s`, the cancel secret of the page the
/// purchase led to; or `t`, the mailed token), and the query that carries
/// it on. A `t` that the key derives for this order proves the mailbox
/// (`mailed`): it is what the ticket mails link with.
pub fn order_proof(
    query: &str,
    state: &super::AppState,
    order_id: OrderId,
) -> (crate::db::orders::Proof, String) {
    let secret = form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "s")
        .and_then(|(_, value)| CancelSecret::parse(&value));
    let token = confirm_token_in(query);
    let carry = match (&secret, &token) {
        (Some(secret), _) => format!("s={}", secret.as_str()),
        (None, Some(token)) => format!("t={}", token.as_str()),
        (None, None) => String::new(),
    };
    let token_hash = token.as_ref().map(ConfirmToken::hash);
    // Hashes compared, not the tokens: no timing tells how much matched.
    let mailed = token_hash
        .as_ref()
        .is_some_and(|hash| *hash == state.sales.confirm_key().token(order_id).hash());
    let proof = crate::db::orders::Proof {
        secret_hash: secret.as_ref().map(CancelSecret::hash),
        token_hash,
        mailed,
    };
    (proof, carry)
}

/// `t` from a query string, as a confirmation token (a mailed link's).
pub fn confirm_token_in(query: &str) -> Option<ConfirmToken> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(key, _)| key == "t")
        .and_then(|(_, value)| ConfirmToken::parse(&value))
}

/// Ids in paths: anything that is not a UUID simply does not exist.
pub fn parse_id<Id: From<Uuid>>(raw: &str) -> Result<Id, AppError> {
    Uuid::parse_str(raw)
        .map(Id::from)
        .map_err(|_| AppError::NotFound)
}

// Defined with the views that read it; extracted here.
pub use super::views::PageContext;

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for PageContext {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(Self {
            csrf: parts
                .extensions
                .get::<super::csrf::CsrfToken>()
                .map(|t| t.0.clone())
                .unwrap_or_default(),
            organizer: parts
                .extensions
                .get::<crate::auth::CurrentOrganizer>()
                .cloned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use axum::body::Body;

    use super::*;

    #[derive(Debug, serde::Deserialize, PartialEq)]
    struct Probe {
        n: i64,
    }

    fn json_request(body: &'static str) -> Request {
        Request::builder()
            .method("POST")
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body))
            .unwrap()
    }

    #[tokio::test]
    async fn without_admission_the_body_is_read_here() {
        let ApiJson(probe) = ApiJson::<Probe>::from_request(json_request(r#"{"n": 7}"#), &())
            .await
            .unwrap();
        assert_eq!(probe, Probe { n: 7 });
    }

    #[tokio::test]
    async fn the_bytes_admission_read_are_parsed_not_read_again() {
        // The body left here is not what admission read: the extension wins.
        let mut request = json_request(r#"{"n": 1}"#);
        request
            .extensions_mut()
            .insert(ReadBody(Bytes::from_static(br#"{"n": 2}"#)));
        let ApiJson(probe) = ApiJson::<Probe>::from_request(request, &()).await.unwrap();
        assert_eq!(probe, Probe { n: 2 });

        let mut request = json_request("");
        request
            .extensions_mut()
            .insert(ReadBody(Bytes::from_static(br#"{"n": "x"}"#)));
        let Err(ApiError(AppError::Invalid(invalid))) =
            ApiJson::<Probe>::from_request(request, &()).await
        else {
            panic!("a wrong field is an invalid field");
        };
        assert_eq!(invalid.field, "n");
    }
}
