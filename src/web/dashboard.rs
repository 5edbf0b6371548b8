//! The organizer's dashboard for one event (`/organizer/events/{id}`) and
//! its CSV export. Behind the session middleware; `find_owned` makes any
//! other organizer's event "not found".

use axum::{
    Extension,
    extract::{Path, RawQuery, State},
    http::{HeaderValue, header},
    response::{IntoResponse, Response},
};
use maud::Markup;

use super::{
    AppState,
    extract::{PageContext, parse_id},
    views,
};
use crate::{auth::CurrentOrganizer, db, error::AppError};

/// `?q=` (email contains, any case) and `?page=` (1-based) of the order
/// list. Parsed by hand so that no query string is ever refused: a missing
/// or malformed page is page 1, and one past the end is the last page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderSearch {
    pub q: String,
    pub page: i64,
}

impl OrderSearch {
    pub fn parse(raw: Option<&str>) -> Self {
        let mut search = Self {
            q: String::new(),
            page: 1,
        };
        let pairs = form_urlencoded::parse(raw.unwrap_or_default().as_bytes());
        let (mut seen_q, mut seen_page) = (false, false);
        for (key, value) in pairs {
            match key.as_ref() {
                "q" if !seen_q => {
                    seen_q = true;
                    search.q = db::dashboard::normalise_query(&value);
                }
                "page" if !seen_page => {
                    seen_page = true;
                    search.page = value.trim().parse::<i64>().unwrap_or(1).max(1);
                }
                _ => {}
            }
        }
        search
    }
}

pub async fn show(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    ctx: PageContext,
    Path(id): Path<String>,
    RawQuery(query): RawQuery,
) -> Result<Markup, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let search = OrderSearch::parse(query.as_deref());
    let dashboard = db::dashboard::load(
        &state.db,
        organizer.id,
        detail.event.id,
        &search.q,
        search.page,
    )
    .await?;
    let sale_state = detail.event.sale_state(state.clock.now());
    Ok(views::dashboard::page(
        &ctx, &detail, sale_state, &dashboard,
    ))
}

pub async fn orders_csv(
    State(state): State<AppState>,
    Extension(organizer): Extension<CurrentOrganizer>,
    Path(id): Path<String>,
) -> Result<Response, AppError> {
    let detail = db::events::find_owned(&state.db, organizer.id, parse_id(&id)?).await?;
    let rows = db::dashboard::export_orders(&state.db, organizer.id, detail.event.id).await?;
    let body = views::dashboard::orders_csv(&rows)?;
    let disposition = HeaderValue::try_from(format!(
        "attachment; filename=\"orders-{}.csv\"",
        detail.event.id
    ))
    .map_err(AppError::internal)?;
    Ok((
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/csv; charset=utf-8"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
            // Buyers' emails: not for shared caches, nor for the browser's.
            (header::CACHE_CONTROL, HeaderValue::from_static("no-store")),
        ],
        body,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn searches_parse_leniently() {
        let parse = |raw: &str| OrderSearch::parse(Some(raw));
        assert_eq!(OrderSearch::parse(None), parse(""));
        assert_eq!(parse("").page, 1);
        assert_eq!(
            parse("q=+Ada%40X+&page=3"),
            OrderSearch {
                q: "Ada@X".into(),
                page: 3
            }
        );
        for page in [
            "page=0",
            "page=-4",
            "page=abc",
            "page=",
            "page=99999999999999999999999",
        ] {
            assert_eq!(parse(page).page, 1, "{page}");
        }
        assert_eq!(parse("page=9223372036854775807").page, i64::MAX);
        assert_eq!(
            parse("q=a&q=b&page=2&page=5"),
            OrderSearch {
                q: "a".into(),
                page: 2
            }
        );
    }
}
