//! Organizer accounts: passwords (argon2id, hashed off the async runtime),
//! browser sessions and API tokens (stored as SHA-256 hashes). The rows are
//! `db::organizers`; the HTTP middleware that requires a log-in is
//! `web::auth`.

use rand::RngCore;
use sha2::{Digest, Sha256};
use sqlx::PgPool;

pub use crate::db::organizers::{ApiToken, Organizer as CurrentOrganizer};
use crate::{
    db::organizers,
    domain::{
        ApiTokenId, ConfirmKey, ConfirmToken, Email, ForField, InvalidField, Lines, OrganizerId,
        refuse_control,
    },
    error::AppError,
};

/// The session key that holds the logged-in organizer's id.
pub const SESSION_ORGANIZER: &str = "organizer_id";

/// 32 random bytes as URL-safe base64 (43 characters): API tokens and CSRF
/// tokens.
pub fn random_token() -> String {
    use base64::Engine as _;
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A password as typed at sign-up: long enough, not absurdly long.
#[derive(Clone)]
pub struct NewPassword(String);

impl NewPassword {
    pub const MIN_CHARS: usize = 10;

    pub fn parse(raw: &str) -> Result<Self, InvalidField> {
        let chars = raw.chars().count();
        if chars < Self::MIN_CHARS {
            return Err(InvalidField::new(
                "password",
                format!(
                    "Use at least {} characters for your password.",
                    Self::MIN_CHARS
                ),
            ));
        }
        if chars > 1024 {
            return Err(InvalidField::new(
                "password",
                "That password is longer than 1,024 characters.",
            ));
        }
        Ok(Self(raw.to_owned()))
    }
}

impl std::fmt::Debug for NewPassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NewPassword(..)")
    }
}

/// Password hashes computed at once. Each argon2id hash takes ~19 MiB and a
/// core for a while; beyond this, log-ins and sign-ups wait their turn (and
/// get 503 if the wait is long) instead of exhausting memory. Only
/// organizers log in, so two at once is plenty. With the allocator in
/// main.rs returning each buffer shortly after its hash ends, hashing adds
/// at most about 4 x 19 MiB to resident memory (two buffers in use, two
/// about to be returned), however many log-ins (docs/architecture.md).
static HASHING: tokio::sync::Semaphore = tokio::sync::Semaphore::const_new(HASHING_SLOTS);
const HASHING_SLOTS: usize = 2;
/// How long a log-in or sign-up waits for a hashing slot before its 503.
const HASHING_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Take every hashing slot, as a crowd of log-ins would, until the permit
/// is dropped: for tests of the 503 that a long wait gets.
#[doc(hidden)]
pub async fn occupy_hashing() -> Result<tokio::sync::SemaphorePermit<'static>, AppError> {
    HASHING
        .acquire_many(HASHING_SLOTS as u32)
        .await
        .map_err(AppError::internal)
}

type HashJob = Box<dyn FnOnce() + Send>;

/// The threads argon2 jobs run on: [`HASHING_SLOTS`] of their own, started
/// once. Not tokio's blocking pool: a job there may land on a thread it
/// has never used, and each thread's allocator keeps its freed 19 MiB for a
/// while, so resident memory grew with the number of threads that had
/// hashed (a flaky `failed_log_ins_leave_resident_memory_bounded`).
fn hashing_threads() -> &'static std::sync::Mutex<std::sync::mpsc::Sender<HashJob>> {
    static THREADS: std::sync::OnceLock<std::sync::Mutex<std::sync::mpsc::Sender<HashJob>>> =
        std::sync::OnceLock::new();
    THREADS.get_or_init(|| {
        let (send, receive) = std::sync::mpsc::channel::<HashJob>();
        let receive = std::sync::Arc::new(std::sync::Mutex::new(receive));
        for n in 0..HASHING_SLOTS {
            let receive = std::sync::Arc::clone(&receive);
            let started = std::thread::Builder::new()
                .name(format!("password-hashing-{n}"))
                .spawn(move || {
                    loop {
                        let job = match receive.lock() {
                            Ok(receive) => receive.recv(),
                            Err(_) => return,
                        };
                        match job {
                            Ok(job) => job(),
                            Err(_) => return,
                        }
                    }
                });
            if let Err(err) = started {
                tracing::error!(error = %err, "cannot start a password-hashing thread");
            }
        }
        std::sync::Mutex::new(send)
    })
}

/// Run an argon2 job on the hashing threads, never on the async workers
/// serving the on-sale, and never more than [`HASHING`] at once.
async fn hashing<T: Send + 'static>(
    job: impl FnOnce() -> T + Send + 'static,
) -> Result<T, AppError> {
    let permit = tokio::time::timeout(HASHING_WAIT, HASHING.acquire())
        .await
        .map_err(|_| AppError::Overloaded)?
        .map_err(AppError::internal)?;
    let (answer, answered) = tokio::sync::oneshot::channel();
    // The permit goes with the job, so that a caller who goes away does not
    // free its slot while the hash still runs.
    let job: HashJob = Box::new(move || {
        let _permit = permit;
        let _ = answer.send(job());
    });
    hashing_threads()
        .lock()
        .map_err(|_| AppError::internal(anyhow::anyhow!("hashing threads poisoned")))?
        .send(job)
        .map_err(|_| AppError::internal(anyhow::anyhow!("no password-hashing thread")))?;
    answered.await.map_err(AppError::internal)
}

async fn hash_password(password: NewPassword) -> Result<String, AppError> {
    hashing(move || password_auth::generate_hash(password.0)).await
}

/// Verify against the account's hash, or against a dummy hash when there is
/// no account, so that a log-in takes as long whether or not it exists.
async fn verify_password(password: String, hash: Option<String>) -> Result<bool, AppError> {
    hashing(move || {
        let hash = hash.as_deref().unwrap_or(&DUMMY_HASH);
        password_auth::verify_password(password, hash).is_ok() && hash != DUMMY_HASH.as_str()
    })
    .await
}

/// A hash no password is accepted for (see [`verify_password`]); computed
/// lazily, on the blocking pool, by the first log-in with an unknown email.
static DUMMY_HASH: std::sync::LazyLock<String> =
    std::sync::LazyLock::new(|| password_auth::generate_hash("stampede-no-such-account"));

/// How a new account's address is known to be its owner's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressProof {
    /// An operator made the account (`stampede organizer add`).
    Operator,
    /// A sign-up on the web: a link is mailed, and until it is followed
    /// the account may prepare events but not publish them, so that
    /// throwaway sign-ups cannot flood the public listing.
    MailedLink,
}

pub async fn sign_up(
    db: &PgPool,
    email: &Email,
    password: NewPassword,
    proof: AddressProof,
) -> Result<CurrentOrganizer, AppError> {
    let hash = hash_password(password).await?;
    let confirmed = proof == AddressProof::Operator;
    organizers::insert(db, email, &hash, confirmed)
        .await?
        .ok_or_else(|| {
            AppError::Invalid(InvalidField::new(
                "email",
                "An organizer with this email already exists; log in instead.",
            ))
        })
}

/// Follow the mailed link: a token that is not this organizer's is "not
/// found" (it tells nothing about the account); a second use is fine.
pub async fn confirm_email(
    db: &PgPool,
    key: &ConfirmKey,
    id: OrganizerId,
    token: &ConfirmToken,
) -> Result<(), AppError> {
    if key.organizer_token(id).hash() != token.hash() {
        return Err(AppError::NotFound);
    }
    if organizers::confirm_email(db, id).await? {
        tracing::info!(organizer_id = %id, "organizer email confirmed");
    }
    Ok(())
}

/// Resends of the confirmation mail: one in this long.
pub const CONFIRMATION_RESEND_EVERY: std::time::Duration = std::time::Duration::from_secs(5 * 60);

/// Mail the confirmation link again, at most once per
/// [`CONFIRMATION_RESEND_EVERY`]; true if a mail was asked for.
pub async fn resend_confirmation(db: &PgPool, id: OrganizerId) -> Result<bool, AppError> {
    organizers::ask_confirmation_again(db, id, CONFIRMATION_RESEND_EVERY).await
}

/// The organizer whose email and password these are, or `None`.
pub async fn log_in(
    db: &PgPool,
    email: &Email,
    password: &str,
) -> Result<Option<CurrentOrganizer>, AppError> {
    let row = organizers::with_password_hash(db, email).await?;
    let hash = row.as_ref().map(|(_, hash)| hash.clone());
    let matches = verify_password(password.to_owned(), hash).await?;
    Ok(row.filter(|_| matches).map(|(organizer, _)| organizer))
}

pub async fn find_organizer(
    db: &PgPool,
    id: OrganizerId,
) -> Result<Option<CurrentOrganizer>, AppError> {
    organizers::find(db, id).await
}

fn token_hash(token: &str) -> Vec<u8> {
    Sha256::digest(token.as_bytes()).to_vec()
}

/// Live (unrevoked) API tokens one account may hold. The API's rate limit
/// is per account, so more tokens would buy no more requests; the cap keeps
/// the table and the settings page small.
pub const MAX_LIVE_API_TOKENS: i64 = 10;

/// Create a token and return it: the only time its text exists outside the
/// organizer's hands.
pub async fn create_token(
    db: &PgPool,
    organizer_id: OrganizerId,
    name: &str,
) -> Result<String, AppError> {
    let name = name.trim();
    if name.is_empty() || name.chars().count() > 100 {
        return Err(AppError::Invalid(InvalidField::new(
            "name",
            "Give the token a name of 1 to 100 characters.",
        )));
    }
    refuse_control(name, Lines::One).for_field("name")?;
    let token = format!("stp_{}", random_token());
    let prefix: String = token.chars().take(10).collect();
    let hash = token_hash(&token);
    if !organizers::insert_token(db, organizer_id, name, &hash, &prefix, MAX_LIVE_API_TOKENS)
        .await?
    {
        return Err(AppError::Invalid(InvalidField::new(
            "name",
            format!(
                "You have {MAX_LIVE_API_TOKENS} live API tokens, the most allowed; revoke one first."
            ),
        )));
    }
    Ok(token)
}

pub async fn list_tokens(
    db: &PgPool,
    organizer_id: OrganizerId,
) -> Result<Vec<ApiToken>, AppError> {
    organizers::list_tokens(db, organizer_id).await
}

pub async fn revoke_token(
    db: &PgPool,
    organizer_id: OrganizerId,
    token_id: ApiTokenId,
) -> Result<(), AppError> {
    organizers::revoke_token(db, organizer_id, token_id).await
}

/// The organizer a live (unrevoked) token belongs to, with the token's id.
pub async fn authenticate_token(
    db: &PgPool,
    token: &str,
) -> Result<Option<(CurrentOrganizer, ApiTokenId)>, AppError> {
    organizers::by_token_hash(db, &token_hash(token)).await
}
