//! Which way purchases reach the stock row: the engine, or one of the
//! baselines kept for comparison (`--sale-strategy`).

use std::{fmt, str::FromStr};

/// How purchases reach the stock row.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Strategy {
    /// Group commit per ticket type (the engine).
    #[default]
    Batch,
    /// One transaction per purchase, the row locked by the final UPDATE
    /// (for comparison only).
    Naive,
    /// One transaction per purchase, the row locked first with
    /// `SELECT ... FOR UPDATE` (for comparison only).
    ForUpdate,
    /// A Redis counter checked with WATCH/MULTI/EXEC before `naive` (for
    /// comparison only).
    RedisWatch,
    /// A Redis counter under a SETNX lock before `naive` (for comparison only).
    RedisLock,
}

impl Strategy {
    pub const ALL: [Self; 5] = [
        Self::Batch,
        Self::Naive,
        Self::ForUpdate,
        Self::RedisWatch,
        Self::RedisLock,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Batch => "batch",
            Self::Naive => "naive",
            Self::ForUpdate => "for-update",
            Self::RedisWatch => "redis-watch",
            Self::RedisLock => "redis-lock",
        }
    }

    pub fn needs_redis(self) -> bool {
        matches!(self, Self::RedisWatch | Self::RedisLock)
    }
}

impl fmt::Display for Strategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Strategy {
    type Err = String;

    fn from_str(raw: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|s| s.as_str() == raw)
            .ok_or_else(|| {
                format!(
                    "unknown sale strategy `{raw}` (batch, naive, for-update, redis-watch, redis-lock)"
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strategies_have_their_names() {
        let names: Vec<String> = Strategy::ALL.iter().map(Strategy::to_string).collect();
        assert_eq!(
            names,
            ["batch", "naive", "for-update", "redis-watch", "redis-lock"]
        );
        for strategy in Strategy::ALL {
            assert_eq!(strategy.as_str().parse(), Ok(strategy));
            assert_eq!(
                strategy.needs_redis(),
                strategy.as_str().starts_with("redis")
            );
        }
        assert!("Batch".parse::<Strategy>().unwrap_err().contains("`Batch`"));
    }
}
