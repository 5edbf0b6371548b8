//! How statuses are read from their text columns: queries name the type in
//! an override (`status AS "status: EventStatus"`) and bind `as_str()`.

use sqlx::{
    Decode, Postgres, Type,
    error::BoxDynError,
    postgres::{PgTypeInfo, PgValueRef},
};

use crate::domain::{EventStatus, OrderStatus, WaitlistStatus};

macro_rules! text_status {
    ($status:ty) => {
        impl Type<Postgres> for $status {
            fn type_info() -> PgTypeInfo {
                <str as Type<Postgres>>::type_info()
            }

            fn compatible(ty: &PgTypeInfo) -> bool {
                <str as Type<Postgres>>::compatible(ty)
            }
        }

        impl<'r> Decode<'r, Postgres> for $status {
            fn decode(value: PgValueRef<'r>) -> Result<Self, BoxDynError> {
                let text = <&str as Decode<Postgres>>::decode(value)?;
                <$status>::from_db(text)
                    .ok_or_else(|| format!("unknown {}: {text:?}", stringify!($status)).into())
            }
        }
    };
}

text_status!(EventStatus);
text_status!(OrderStatus);
text_status!(WaitlistStatus);
