//! Static files, embedded in the binary (it runs from any directory) and
//! linked with a content hash so browsers may cache them for a year.

use std::sync::LazyLock;

use axum::{
    extract::Path,
    http::{HeaderMap, HeaderValue, StatusCode, header},
    response::{IntoResponse, Response},
};

struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

static ASSETS: &[Asset] = &[
    Asset {
        name: "style.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("../../static/style.css"),
    },
    Asset {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/app.js"),
    },
    Asset {
        name: "proof-worker.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/proof-worker.js"),
    },
    Asset {
        name: "door.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/door.js"),
    },
    Asset {
        name: "pay.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("../../static/pay.js"),
    },
];

/// FNV-1a of each asset: stable across builds and platforms.
static HASHES: LazyLock<Vec<String>> = LazyLock::new(|| {
    ASSETS
        .iter()
        .map(|asset| {
            let hash = asset.body.iter().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
                (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
            });
            format!("{hash:016x}")
        })
        .collect()
});

/// The URL to link an asset with: changes whenever its content does.
pub fn url(name: &str) -> String {
    match ASSETS.iter().position(|a| a.name == name) {
        Some(i) => format!("/static/{name}?v={}", HASHES[i]),
        None => format!("/static/{name}"),
    }
}

pub async fn serve(Path(file): Path<String>, headers: HeaderMap) -> Response {
    let Some(index) = ASSETS.iter().position(|a| a.name == file) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let asset = &ASSETS[index];
    let etag = format!("\"{}\"", HASHES[index]);
    let cache = [
        (
            header::CACHE_CONTROL,
            HeaderValue::from_static("public, max-age=31536000, immutable"),
        ),
        (
            header::ETAG,
            HeaderValue::from_str(&etag).unwrap_or(HeaderValue::from_static("\"0\"")),
        ),
    ];
    // If-None-Match may list several tags, weak ones (W/"..") or `*`.
    let matches = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(',')
                .map(|tag| tag.trim().trim_start_matches("W/"))
                .any(|tag| tag == "*" || tag == etag)
        });
    if matches {
        return (StatusCode::NOT_MODIFIED, cache).into_response();
    }
    (
        cache,
        [(header::CONTENT_TYPE, asset.content_type)],
        asset.body,
    )
        .into_response()
}
