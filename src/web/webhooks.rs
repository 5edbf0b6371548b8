//! The organizer's webhook pages: the section of /organizer/settings that
//! lists endpoints and adds one (its secret shown once), and an endpoint's
//! page with its delivery log and buttons (enable, disable, rotate the
//! secret, delete, redeliver). Every form is CSRF-protected (`web::csrf`);
//! another organizer's endpoint is "not found".

use axum::{
    Extension,
    extract::{Path, State},
    http::StatusCode,
    response::{IntoResponse, Redirect, Response},
};
use maud::Markup;

use super::{
    AppState,
    extract::{FormFields, PageContext, parse_id},
    views::{
        FormError, account as account_view,
        webhooks::{self as view, NewSecret, WebhookForm},
    },
};
use crate::{
    auth::{self, CurrentOrganizer},
    db::webhooks as store,
    domain::{DeliveryId, WebhookId},
    error::AppError,
    webhooks::endpoints::{self, EndpointInput, EndpointPatch},
};

/// Deliveries shown on an endpoint's page.
const DELIVERIES_SHOWN: i64 = 50;

/// The settings page's webhooks section with an empty form.
pub async fn settings_section(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
) -> Result<Markup, AppError> {
    section(state, organizer, ctx, &WebhookForm::default(), None).await
}

async fn section(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
    form: &WebhookForm,
    new_secret: Option<&NewSecret>,
) -> Result<Markup, AppError> {
    let endpoints = store::list(&state.db, organizer.id, None, 100).await?;
    Ok(view::section(ctx, &endpoints, form, new_secret))
}

/// The whole settings page around a webhooks section.
async fn settings_page(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
    webhooks: Markup,
) -> Result<Markup, AppError> {
    let tokens = auth::list_tokens(&state.db, organizer.id).await?;
    Ok(account_view::settings(ctx, &tokens, None, None, webhooks))
}

/// `POST /organizer/settings/webhooks`: the settings page again, with the
/// new endpoint and its secret shown once, or the form filled in with the
/// error.
pub async fn create(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    fields: FormFields,
) -> Result<Response, AppError> {
    let mut form = WebhookForm {
        url: fields.get("url").to_owned(),
        description: fields.get("description").to_owned(),
        event_types: fields
            .0
            .iter()
            .filter(|(name, _)| name == "event_types")
            .map(|(_, value)| value.clone())
            .collect(),
        error: None,
    };
    let input = EndpointInput {
        url: form.url.clone(),
        description: form.description.clone(),
        event_types: form.event_types.clone(),
    };
    match endpoints::create(
        &state.db,
        organizer.id,
        &input,
        state.webhooks_allow_private,
    )
    .await
    {
        Ok((endpoint, secret)) => {
            let new = NewSecret {
                url: endpoint.url,
                secret,
            };
            let webhooks = section(
                &state,
                &organizer,
                &ctx,
                &WebhookForm::default(),
                Some(&new),
            )
            .await?;
            Ok(settings_page(&state, &organizer, &ctx, webhooks)
                .await?
                .into_response())
        }
        Err(err @ AppError::Invalid(_)) => {
            form.error = Some(FormError::from_app(&err));
            let webhooks = section(&state, &organizer, &ctx, &form, None).await?;
            Ok((
                StatusCode::UNPROCESSABLE_ENTITY,
                settings_page(&state, &organizer, &ctx, webhooks).await?,
            )
                .into_response())
        }
        Err(err) => Err(err),
    }
}

/// `GET /organizer/settings/webhooks/{id}`.
pub async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
) -> Result<Markup, AppError> {
    endpoint_page(&state, &organizer, &ctx, parse_id(&id)?, None).await
}

async fn endpoint_page(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
    id: WebhookId,
    new_secret: Option<&NewSecret>,
) -> Result<Markup, AppError> {
    let endpoint = store::find_owned(&state.db, organizer.id, id).await?;
    let deliveries = store::deliveries(&state.db, endpoint.id, None, DELIVERIES_SHOWN).await?;
    Ok(view::endpoint_page(ctx, &endpoint, &deliveries, new_secret))
}

fn back_to(id: WebhookId) -> Redirect {
    Redirect::to(&format!("/organizer/settings/webhooks/{id}"))
}

async fn set_enabled(
    state: &AppState,
    organizer: &CurrentOrganizer,
    id: &str,
    enabled: bool,
) -> Result<Redirect, AppError> {
    let id: WebhookId = parse_id(id)?;
    let patch = EndpointPatch {
        enabled: Some(enabled),
        ..EndpointPatch::default()
    };
    endpoints::update(
        &state.db,
        organizer.id,
        id,
        &patch,
        state.webhooks_allow_private,
    )
    .await?;
    Ok(back_to(id))
}

/// `POST .../{id}/enable`: deliveries resume, the reason is cleared.
pub async fn enable(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    set_enabled(&state, &organizer, &id, true).await
}

/// `POST .../{id}/disable`.
pub async fn disable(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    set_enabled(&state, &organizer, &id, false).await
}

/// `POST .../{id}/rotate-secret`: the page with the new secret, once.
pub async fn rotate_secret(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
) -> Result<Markup, AppError> {
    let id: WebhookId = parse_id(&id)?;
    let secret = endpoints::rotate_secret(&state.db, organizer.id, id).await?;
    let endpoint = store::find_owned(&state.db, organizer.id, id).await?;
    let new = NewSecret {
        url: endpoint.url,
        secret,
    };
    endpoint_page(&state, &organizer, &ctx, id, Some(&new)).await
}

/// `POST .../{id}/delete`.
pub async fn delete(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Redirect, AppError> {
    store::delete(&state.db, organizer.id, parse_id(&id)?).await?;
    Ok(Redirect::to("/organizer/settings#webhooks"))
}

/// `POST .../{id}/deliveries/{delivery}/redeliver`: sent again soon, with
/// the same `webhook-id`.
pub async fn redeliver(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path((id, delivery)): Path<(String, String)>,
) -> Result<Redirect, AppError> {
    let id: WebhookId = parse_id(&id)?;
    let delivery: DeliveryId = parse_id(&delivery)?;
    store::redeliver(&state.db, organizer.id, id, delivery).await?;
    Ok(back_to(id))
}
