//! Where a connection that needs a session of its own goes (a LISTEN, a
//! session lock): straight to Postgres, not through a pooler in
//! transaction mode, which would hand the session's server to others.

use std::sync::OnceLock;

use sqlx::{PgPool, postgres::PgConnectOptions};

/// Set once at start-up from `--database-direct-url`; a process serves one
/// database, so this is process-wide rather than threaded through every
/// task that may listen.
static DIRECT: OnceLock<PgConnectOptions> = OnceLock::new();

/// Open sessions with `options` from now on (the first call wins).
pub fn use_direct(options: PgConnectOptions) {
    let _ = DIRECT.set(options);
}

/// The options for a session of its own beside `pool`: the direct URL when
/// one was given, else the pool's own.
pub fn direct_options(pool: &PgPool) -> PgConnectOptions {
    DIRECT
        .get()
        .cloned()
        .unwrap_or_else(|| (*pool.connect_options()).clone())
}
