//! The organizer's presale codes page (`/organizer/events/{id}/codes`):
//! list, create (CSRF-protected form) and export as CSV. Another organizer's
//! event is "not found".

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::{StatusCode, header},
    response::{IntoResponse, Redirect, Response},
};
use time::format_description::well_known::Rfc3339;

use super::{
    AppState,
    export::neutralise_cell,
    extract::{FormFields, PageContext, parse_id},
    views::{
        FormError,
        presale::{self as view, CodeForm},
    },
};
use crate::{
    auth::CurrentOrganizer,
    db::{self, presale::CodeSummary},
    domain::{CodeCursor, CodeInput, CodeQuery, EventId, MAX_ORDERS_LIMIT},
    error::AppError,
};

/// `GET /organizer/events/{id}/codes[?created=N][&after=CURSOR]`: a page
/// of the codes.
pub async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let created = form_urlencoded::parse(query.as_deref().unwrap_or_default().as_bytes())
        .find(|(key, _)| key == "created")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0);
    let page = CodeQuery::from_page(query.as_deref(), CodeCursor::parse)?;
    render(
        &state,
        &organizer,
        &ctx,
        (event_id, &page),
        &CodeForm::default(),
        created,
    )
    .await
}

/// `POST /organizer/events/{id}/codes`: create, then back to the list
/// (POST → 303 → GET), or the form filled in with the error.
pub async fn create(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    fields: FormFields,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let mut form = CodeForm {
        code: fields.get("code").to_owned(),
        count: fields.get("count").to_owned(),
        max_uses: fields.get("max_uses").to_owned(),
        valid_from: fields.get("valid_from").to_owned(),
        valid_until: fields.get("valid_until").to_owned(),
        ticket_type_ids: fields
            .0
            .iter()
            .filter(|(name, _)| name == "ticket_type_ids")
            .map(|(_, value)| value.clone())
            .collect(),
        error: None,
    };
    let input = CodeInput {
        code: form.code.clone(),
        count: form.count.clone(),
        max_uses: form.max_uses.clone(),
        valid_from: form.valid_from.clone(),
        valid_until: form.valid_until.clone(),
        ticket_type_ids: form.ticket_type_ids.clone(),
    };
    let zone = db::events::zone_owned(&state.db, organizer.id, event_id).await?;
    let created = match input.parse(&zone) {
        Ok(new) => {
            db::presale::create(&state.db, organizer.id, event_id, &state.quotas, &new).await
        }
        Err(invalid) => Err(invalid.into()),
    };
    match created {
        Ok(codes) => Ok(Redirect::to(&format!(
            "/organizer/events/{event_id}/codes?created={}",
            codes.len()
        ))
        .into_response()),
        Err(err @ AppError::Invalid(_)) => {
            form.error = Some(FormError::from_app(&err));
            let first = CodeQuery::default();
            let mut page = render(&state, &organizer, &ctx, (event_id, &first), &form, 0).await?;
            *page.status_mut() = StatusCode::UNPROCESSABLE_ENTITY;
            Ok(page)
        }
        Err(err) => Err(err),
    }
}

async fn render(
    state: &AppState,
    organizer: &CurrentOrganizer,
    ctx: &PageContext,
    (event_id, page): (EventId, &CodeQuery),
    form: &CodeForm,
    created: usize,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    let (codes, next) = db::presale::page(&state.db, organizer.id, event_id, page).await?;
    let pages = view::Pages {
        first: page.after.is_none(),
        next,
    };
    Ok(view::page(ctx, &detail, &codes, &pages, form, created).into_response())
}

/// The columns of the codes' CSV export, in order.
pub const CODES_CSV_HEADER: [&str; 6] = [
    "code",
    "max_uses",
    "used",
    "valid_from",
    "valid_until",
    "ticket_types",
];

/// `GET /organizer/events/{id}/codes.csv`: every code of the event (at most
/// the event's quota), read a page at a time.
pub async fn export(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let event_id: EventId = parse_id(&id)?;
    let detail = db::events::find_owned(&state.db, organizer.id, event_id).await?;
    let mut codes = Vec::new();
    let mut query = CodeQuery {
        limit: MAX_ORDERS_LIMIT,
        after: None,
    };
    loop {
        let (page, next) = db::presale::page(&state.db, organizer.id, event_id, &query).await?;
        codes.extend(page);
        match next {
            Some(next) => query.after = Some(next),
            None => break,
        }
    }
    let names = |code: &CodeSummary| {
        code.ticket_type_ids
            .iter()
            .filter_map(|id| detail.ticket_types.iter().find(|t| t.id.get() == *id))
            .map(|t| t.name.as_str())
            .collect::<Vec<_>>()
            .join("; ")
    };
    let when = |at: Option<time::OffsetDateTime>| {
        at.and_then(|at| at.format(&Rfc3339).ok())
            .unwrap_or_default()
    };
    let mut writer = csv::Writer::from_writer(Vec::new());
    writer
        .write_record(CODES_CSV_HEADER)
        .map_err(AppError::internal)?;
    for code in &codes {
        let cells = [
            code.code.clone(),
            code.max_uses.to_string(),
            code.used.to_string(),
            when(code.valid_from),
            when(code.valid_until),
            names(code),
        ];
        writer
            .write_record(cells.iter().map(|cell| neutralise_cell(cell).into_owned()))
            .map_err(AppError::internal)?;
    }
    let body = writer
        .into_inner()
        .map_err(|err| AppError::internal(err.into_error()))?;
    Ok((
        [
            (header::CONTENT_TYPE, "text/csv; charset=utf-8".to_owned()),
            (
                header::CONTENT_DISPOSITION,
                format!("attachment; filename=\"presale-codes-{event_id}.csv\""),
            ),
            (header::CACHE_CONTROL, "no-store".to_owned()),
        ],
        body,
    )
        .into_response())
}
