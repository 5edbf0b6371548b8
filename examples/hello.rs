//! A bare axum hello-world, the yardstick for Stampede's own trivial route
//! (`scripts/bench` runs it beside the app). Listens on the address given
//! as the first argument (default 127.0.0.1:3001).

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let addr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:3001".to_owned());
    let app = axum::Router::new().fallback(|| async { "Hello, world!" });
    let listener = tokio::net::TcpListener::bind(&addr).await?;
    axum::serve(listener, app).await
}
