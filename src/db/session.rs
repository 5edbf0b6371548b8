//! Where a connection that needs a session of its own goes (a LISTEN, a
//! session lock): straight to Postgres, not through a pooler in
//! transaction mode, which would hand the session's server to others.

use std::sync::OnceLock;

use sqlx::{
    PgPool,
    postgres::{PgConnectOptions, PgPoolOptions},
};

/// Set once at start-up from `--database-direct-url`; a process serves one
/// database, so this is process-wide rather than threaded through every
/// task that may listen.
static DIRECT: OnceLock<PgConnectOptions> = OnceLock::new();

/// The sessions' own small pool to the direct URL, made on first use.
static SESSIONS: OnceLock<PgPool> = OnceLock::new();

/// Open sessions with `options` from now on (the first call wins).
pub fn use_direct(options: PgConnectOptions) {
    let _ = DIRECT.set(options);
}

/// The pool the web sessions are stored through: with a direct URL, a
/// small pool of its own to it (sessions are written by an outside crate
/// with one-off statements, which a pooler in transaction mode would let
/// commit late); else `pool`.
pub fn pool_for_sessions(pool: &PgPool) -> PgPool {
    match DIRECT.get() {
        Some(direct) => SESSIONS
            .get_or_init(|| {
                PgPoolOptions::new()
                    .max_connections(4)
                    .connect_lazy_with(direct.clone())
            })
            .clone(),
        None => pool.clone(),
    }
}

/// The options for a session of its own beside `pool`: the direct URL when
/// one was given, else the pool's own.
pub fn direct_options(pool: &PgPool) -> PgConnectOptions {
    DIRECT
        .get()
        .cloned()
        .unwrap_or_else(|| (*pool.connect_options()).clone())
}
