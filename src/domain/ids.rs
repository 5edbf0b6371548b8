//! Row ids as distinct types, so that `find_owned(db, organizer_id,
//! event_id)` cannot be called with the two swapped.

use std::fmt;

use uuid::Uuid;

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord,
            serde::Serialize, serde::Deserialize, utoipa::ToSchema,
        )]
        #[serde(transparent)]
        pub struct $name(Uuid);

        impl $name {
            pub const fn get(self) -> Uuid {
                self.0
            }

            /// An id from a path or a form; `None` if it is not a UUID.
            pub fn parse(raw: &str) -> Option<Self> {
                Uuid::parse_str(raw.trim()).ok().map(Self)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }

        impl From<$name> for Uuid {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }
    };
}

id_type!(
    /// An event (`events.id`).
    EventId
);
id_type!(
    /// A ticket type of an event (`ticket_types.id`).
    TicketTypeId
);
id_type!(
    /// A buyer's order (`orders.id`).
    OrderId
);
id_type!(
    /// An organizer account (`organizers.id`).
    OrganizerId
);
id_type!(
    /// An organizer's API token (`api_tokens.id`).
    ApiTokenId
);
id_type!(
    /// A staff link to the scanner of one event (`door_links.id`).
    DoorLinkId
);
id_type!(
    /// An organizer's webhook endpoint (`webhook_endpoints.id`).
    WebhookId
);
id_type!(
    /// One message to one webhook endpoint (`webhook_deliveries.id`).
    DeliveryId
);
id_type!(
    /// A buyer's place in an event's waiting room (`queue_entries.id`).
    QueueEntryId
);
id_type!(
    /// A buyer's place on a ticket type's waiting list (`waitlist_entries.id`).
    WaitlistEntryId
);
