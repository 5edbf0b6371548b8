/// A client-chosen key that makes a purchase safe to retry: the same key from
/// the same buyer always yields the same order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IdempotencyKey(String);

impl IdempotencyKey {
    pub fn parse(raw: &str) -> Result<Self, String> {
        let raw = raw.trim();
        if raw.is_empty() {
            return Err("An idempotency key is required; reload the page and try again.".into());
        }
        if raw.len() > 128 {
            return Err("The idempotency key is longer than 128 characters.".into());
        }
        if !raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
        {
            return Err("The idempotency key may only hold letters, digits and - _ . :".into());
        }
        Ok(Self(raw.to_owned()))
    }

    /// A fresh random key, embedded in every rendered buy form.
    pub fn generate() -> Self {
        Self(uuid::Uuid::new_v4().to_string())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_uuids_and_refuses_odd_characters() {
        assert!(IdempotencyKey::parse(IdempotencyKey::generate().as_str()).is_ok());
        assert!(IdempotencyKey::parse("").is_err());
        assert!(IdempotencyKey::parse("has space").is_err());
        assert!(IdempotencyKey::parse(&"k".repeat(129)).is_err());
    }
}
