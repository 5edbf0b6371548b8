//! Sign-up, log-in, log-out and the settings page with API tokens (its
//! webhooks section is `web::webhooks`).

use axum::{
    Extension,
    extract::{Path, Query, RawQuery, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;
use serde::Deserialize;
use tower_sessions::Session;

use super::{
    AppState,
    extract::{FormFields, PageContext, confirm_token_in, parse_id},
    views::{
        FormError,
        account::{self as view, Credentials},
        mailed_link,
    },
    webhooks,
};
use crate::{
    auth::{self, AddressProof, CurrentOrganizer, NewPassword, SESSION_ORGANIZER},
    domain::{ConfirmToken, Email, ForField, OrganizerId},
    error::AppError,
};

#[derive(Debug, Deserialize)]
pub struct NextQuery {
    next: Option<String>,
}

/// Only paths inside the organizer area, so that `next` cannot send a
/// freshly logged-in organizer to another site or climb out with `..`.
fn safe_next(next: &str) -> &str {
    let inside = next == "/organizer" || next.starts_with("/organizer/");
    let plain = next
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'/' | b'-' | b'_' | b'.'))
        && next
            .split('/')
            .skip(1)
            .all(|segment| !matches!(segment, "" | "." | ".."));
    if inside && plain { next } else { "/organizer" }
}

/// What a sign-up or log-in form sent, to show it again if it is refused.
fn posted(fields: &FormFields) -> Credentials {
    Credentials {
        email: fields.get("email").to_owned(),
        next: safe_next(fields.get("next")).to_owned(),
        error: None,
    }
}

pub async fn sign_up_form(ctx: PageContext) -> Markup {
    view::sign_up(&ctx, &Credentials::default())
}

pub async fn sign_up(
    State(state): State<AppState>,
    session: Session,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let result = async {
        let email = Email::parse(fields.get("email")).for_field("email")?;
        let password = NewPassword::parse(fields.get("password"))?;
        auth::sign_up(&state.db, &email, password, AddressProof::MailedLink).await
    }
    .await;
    match result {
        Ok(organizer) => {
            start_session(&session, &organizer).await?;
            Ok(Redirect::to("/organizer").into_response())
        }
        Err(err @ (AppError::Invalid(_) | AppError::BadRequest(_))) => {
            let form = Credentials {
                error: Some(FormError::from_app(&err)),
                ..posted(&fields)
            };
            Ok((err.status(), view::sign_up(&ctx, &form)).into_response())
        }
        Err(err) => Err(err),
    }
}

pub async fn log_in_form(ctx: PageContext, Query(query): Query<NextQuery>) -> Markup {
    let form = Credentials {
        next: safe_next(query.next.as_deref().unwrap_or("")).to_owned(),
        ..Credentials::default()
    };
    view::log_in(&ctx, &form)
}

pub async fn log_in(
    State(state): State<AppState>,
    session: Session,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let mut form = posted(&fields);
    let organizer = match Email::parse(&form.email) {
        Ok(email) => auth::log_in(&state.db, &email, fields.get("password")).await?,
        Err(_) => None,
    };
    match organizer {
        Some(organizer) => {
            start_session(&session, &organizer).await?;
            Ok(Redirect::to(&form.next).into_response())
        }
        None => {
            tracing::info!("failed log-in");
            form.error = Some(FormError {
                field: Some("password".into()),
                message: "That email and password do not match an organizer account.".into(),
            });
            Ok((StatusCode::UNAUTHORIZED, view::log_in(&ctx, &form)).into_response())
        }
    }
}

/// A new session id at log-in, so that a planted session cookie is useless.
async fn start_session(session: &Session, organizer: &CurrentOrganizer) -> Result<(), AppError> {
    session.cycle_id().await.map_err(AppError::internal)?;
    session
        .insert(SESSION_ORGANIZER, organizer.id)
        .await
        .map_err(AppError::internal)?;
    tracing::info!(organizer_id = %organizer.id, "organizer logged in");
    Ok(())
}

pub async fn log_out(session: Session) -> Result<Redirect, AppError> {
    session.flush().await.map_err(AppError::internal)?;
    Ok(Redirect::to("/"))
}

pub async fn settings(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
) -> Result<Markup, AppError> {
    let tokens = auth::list_tokens(&state.db, organizer.id).await?;
    let webhooks = webhooks::settings_section(&state, &organizer, &ctx).await?;
    Ok(view::settings(&ctx, &tokens, None, None, webhooks))
}

/// The new token is shown once, on this response, and never again.
pub async fn create_token(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let created = auth::create_token(&state.db, organizer.id, fields.get("name")).await;
    let tokens = auth::list_tokens(&state.db, organizer.id).await?;
    let webhooks = webhooks::settings_section(&state, &organizer, &ctx).await?;
    Ok(match created {
        Ok(token) => view::settings(&ctx, &tokens, Some(&token), None, webhooks).into_response(),
        Err(err @ AppError::Invalid(_)) => (
            err.status(),
            view::settings(
                &ctx,
                &tokens,
                None,
                Some(&FormError::from_app(&err)),
                webhooks,
            ),
        )
            .into_response(),
        Err(err) => return Err(err),
    })
}

pub async fn revoke_token(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    auth::revoke_token(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Redirect::to("/organizer/settings"))
}

/// `GET /account/confirm-email/{id}?t=`: the sign-up mail's link opens a
/// page whose button confirms; the GET itself (a mail scanner's fetch)
/// changes nothing. No log-in needed: the token proves the mailbox.
pub async fn confirm_email_page(
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let organizer_id: OrganizerId = parse_id(&id)?;
    let token = confirm_token_in(&query.unwrap_or_default()).ok_or(AppError::NotFound)?;
    Ok(mailed_link::page(
        &ctx,
        &mailed_link::MailedLink {
            title: "Confirm your organizer address",
            explanation: "Confirm that this address is yours, so that you can publish events.",
            action: format!("/account/confirm-email/{organizer_id}"),
            token: &token,
            button: "Confirm my address",
        },
    ))
}

/// `POST /account/confirm-email/{id}` (`t` in the form).
pub async fn confirm_email(
    State(state): State<AppState>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Markup, AppError> {
    let organizer_id: OrganizerId = parse_id(&id)?;
    let token = ConfirmToken::parse(fields.get("t")).ok_or(AppError::NotFound)?;
    auth::confirm_email(&state.db, state.sales.confirm_key(), organizer_id, &token).await?;
    Ok(view::email_confirmed(&ctx))
}

/// `POST /organizer/settings/confirmation-mail`: mail the link again.
pub async fn resend_confirmation(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
) -> Result<Markup, AppError> {
    let sent_now = auth::resend_confirmation(&state.db, organizer.id).await?;
    Ok(view::confirmation_mailed(&ctx, &organizer.email, sent_now))
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_inside_the_organizer_area() {
        for ok in [
            "/organizer",
            "/organizer/events/1/orders.csv",
            "/organizer/settings",
        ] {
            assert_eq!(safe_next(ok), ok);
        }
        for bad in [
            "https://evil.example/organizer",
            "//evil.example",
            "/organizer/../logout",
            "/organizer/./x",
            "/organizer//x",
            "/organizer/%2e%2e/x",
            "/organizerx",
            "",
        ] {
            assert_eq!(safe_next(bad), "/organizer", "{bad}");
        }
    }
}
