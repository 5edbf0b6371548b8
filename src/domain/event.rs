use time::{
    OffsetDateTime, PrimitiveDateTime, format_description::well_known::Rfc3339,
    macros::format_description,
};

use super::{
    Currency, EventStatus, ForField, InvalidField, Lines, MAX_QUANTITY, Money, SaleWindow,
    TicketTypeId, refuse_control,
};

pub const MAX_TICKET_TYPES: usize = 20;
pub const MAX_CAPACITY: i64 = 1_000_000;
pub const MAX_PER_BUYER: i64 = 10_000;
const DEFAULT_MAX_PER_ORDER: i64 = 10;

/// An event as typed by an organizer (form) or sent by a script (API):
/// text everywhere, parsed by [`EventInput::parse`].
#[derive(Debug, Clone, Default)]
pub struct EventInput {
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: String,
    pub sale_opens_at: String,
    pub sale_closes_at: String,
    pub status: String,
    /// The event's limit per buyer across its ticket types; blank for none.
    pub max_per_buyer: String,
    pub ticket_types: Vec<TicketTypeInput>,
}

#[derive(Debug, Clone, Default)]
pub struct TicketTypeInput {
    /// Set when editing an existing ticket type.
    pub id: Option<TicketTypeId>,
    pub name: String,
    /// Decimal ("12.50") from forms; minor units from the API.
    pub price: String,
    pub price_is_minor: bool,
    pub currency: String,
    pub capacity: String,
    pub max_per_order: String,
    pub max_per_buyer: String,
}

impl TicketTypeInput {
    /// A blank row of the organizer form, which is ignored.
    pub fn is_blank(&self) -> bool {
        self.id.is_none()
            && [&self.name, &self.price, &self.capacity]
                .iter()
                .all(|s| s.trim().is_empty())
    }
}

#[derive(Debug, Clone)]
pub struct NewEvent {
    pub title: String,
    pub description: String,
    pub venue: String,
    pub starts_at: OffsetDateTime,
    /// Its status and sale window, already checked to be in order.
    pub window: SaleWindow,
    /// At most this many tickets per buyer across the ticket types.
    pub max_per_buyer: Option<i32>,
    pub ticket_types: Vec<NewTicketType>,
}

#[derive(Debug, Clone)]
pub struct NewTicketType {
    /// The row of the input it came from, for error messages.
    pub row: usize,
    pub id: Option<TicketTypeId>,
    pub name: String,
    pub price: Money,
    pub capacity: i32,
    pub max_per_order: i32,
    pub max_per_buyer: i32,
}

impl EventInput {
    pub fn parse(&self) -> Result<NewEvent, InvalidField> {
        let title = text(&self.title, 200).for_field("title")?;
        let venue = text(&self.venue, 200).for_field("venue")?;
        let description = self.description.trim().to_owned();
        refuse_control(&description, Lines::Many).for_field("description")?;
        if description.chars().count() > 10_000 {
            return Err(InvalidField::new(
                "description",
                "Keep the description under 10,000 characters.",
            ));
        }
        let starts_at = parse_datetime(&self.starts_at).for_field("starts_at")?;
        let sale_opens_at = parse_datetime(&self.sale_opens_at).for_field("sale_opens_at")?;
        let sale_closes_at = match self.sale_closes_at.trim() {
            "" => None,
            raw => Some(parse_datetime(raw).for_field("sale_closes_at")?),
        };
        if sale_opens_at >= starts_at {
            return Err(InvalidField::new(
                "sale_opens_at",
                "The sale must open before the event starts.",
            ));
        }
        if sale_closes_at.is_some_and(|closes| closes <= sale_opens_at) {
            return Err(InvalidField::new(
                "sale_closes_at",
                "The sale must close after it opens.",
            ));
        }
        let max_per_buyer = match self.max_per_buyer.trim() {
            "" => None,
            raw => Some(whole(raw, 1, MAX_PER_BUYER).for_field("max_per_buyer")? as i32),
        };
        let status = match self.status.trim() {
            "" | "draft" => EventStatus::Draft,
            "published" => EventStatus::Published,
            other => {
                return Err(InvalidField::new(
                    "status",
                    format!("\"{other}\" is not a status; use draft or published."),
                ));
            }
        };

        let rows: Vec<_> = self
            .ticket_types
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_blank())
            .collect();
        if rows.is_empty() {
            return Err(InvalidField::new(
                "ticket_types",
                "Add at least one ticket type.",
            ));
        }
        if rows.len() > MAX_TICKET_TYPES {
            return Err(InvalidField::new(
                "ticket_types",
                format!("An event can have at most {MAX_TICKET_TYPES} ticket types."),
            ));
        }
        let mut ticket_types: Vec<NewTicketType> = Vec::with_capacity(rows.len());
        for (index, row) in rows {
            let parsed = row.parse(index)?;
            if ticket_types
                .iter()
                .any(|t| t.name.eq_ignore_ascii_case(&parsed.name))
            {
                return Err(InvalidField::new(
                    format!("ticket_types[{index}].name"),
                    format!("Two ticket types are called \"{}\".", parsed.name),
                ));
            }
            ticket_types.push(parsed);
        }
        Ok(NewEvent {
            title,
            description,
            venue,
            starts_at,
            window: SaleWindow {
                status,
                opens_at: sale_opens_at,
                closes_at: sale_closes_at,
                starts_at,
            },
            max_per_buyer,
            ticket_types,
        })
    }
}

impl TicketTypeInput {
    fn parse(&self, index: usize) -> Result<NewTicketType, InvalidField> {
        let field = |name: &str| format!("ticket_types[{index}].{name}");
        let name = text(&self.name, 100).for_field(&field("name"))?;
        let currency_raw = if self.currency.trim().is_empty() {
            "EUR"
        } else {
            &self.currency
        };
        let currency = Currency::parse(currency_raw).for_field(&field("currency"))?;
        let price = if self.price_is_minor {
            whole(&self.price, 0, i64::MAX)
                .and_then(|minor| Money::from_minor(minor, currency))
                .for_field(&field("price_minor"))?
        } else {
            Money::parse_decimal(&self.price, currency).for_field(&field("price"))?
        };
        let capacity = whole(&self.capacity, 0, MAX_CAPACITY).for_field(&field("capacity"))?;
        let max_per_order = match self.max_per_order.trim() {
            "" => DEFAULT_MAX_PER_ORDER.min(capacity.max(1)),
            raw => whole(raw, 1, i64::from(MAX_QUANTITY)).for_field(&field("max_per_order"))?,
        };
        let max_per_buyer = match self.max_per_buyer.trim() {
            "" => max_per_order,
            raw => whole(raw, 1, MAX_PER_BUYER).for_field(&field("max_per_buyer"))?,
        };
        if max_per_buyer < max_per_order {
            return Err(InvalidField::new(
                field("max_per_buyer"),
                "The limit per buyer cannot be below the limit per order.",
            ));
        }
        Ok(NewTicketType {
            row: index,
            id: self.id,
            name,
            price,
            capacity: capacity as i32,
            max_per_order: max_per_order as i32,
            max_per_buyer: max_per_buyer as i32,
        })
    }
}

fn text(raw: &str, max_chars: usize) -> Result<String, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() {
        return Err("This field is required.".into());
    }
    refuse_control(trimmed, Lines::One)?;
    if trimmed.chars().count() > max_chars {
        return Err(format!("Keep this under {max_chars} characters."));
    }
    Ok(trimmed.to_owned())
}

fn whole(raw: &str, min: i64, max: i64) -> Result<i64, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("This field is required.".into());
    }
    let n: i64 = raw
        .parse()
        .map_err(|_| format!("\"{raw}\" is not a whole number."))?;
    if n < min || n > max {
        return Err(format!("Enter a number from {min} to {max}."));
    }
    Ok(n)
}

/// RFC 3339 (API) or the `datetime-local` form format, read as UTC.
pub fn parse_datetime(raw: &str) -> Result<OffsetDateTime, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Err("This field is required.".into());
    }
    if let Ok(t) = OffsetDateTime::parse(raw, &Rfc3339) {
        return Ok(t);
    }
    let minutes = format_description!("[year]-[month]-[day]T[hour]:[minute]");
    let seconds = format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]");
    PrimitiveDateTime::parse(raw, minutes)
        .or_else(|_| PrimitiveDateTime::parse(raw, seconds))
        .map(PrimitiveDateTime::assume_utc)
        .map_err(|_| format!("\"{raw}\" is not a date and time such as 2027-03-01T19:30."))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid() -> EventInput {
        EventInput {
            title: "Concert".into(),
            venue: "Hall".into(),
            starts_at: "2027-03-01T19:30".into(),
            sale_opens_at: "2027-01-01T10:00:00Z".into(),
            ticket_types: vec![TicketTypeInput {
                name: "Standing".into(),
                price: "25.00".into(),
                capacity: "100".into(),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn parses_a_valid_event_with_defaults() {
        let event = valid().parse().unwrap();
        assert_eq!(event.window.status, EventStatus::Draft);
        let tt = &event.ticket_types[0];
        assert_eq!(
            (
                tt.price.minor,
                tt.capacity,
                tt.max_per_order,
                tt.max_per_buyer
            ),
            (2500, 100, 10, 10)
        );
    }

    #[test]
    fn names_the_field_that_is_wrong() {
        let mut input = valid();
        input.ticket_types[0].capacity = "-5".into();
        assert_eq!(input.parse().unwrap_err().field, "ticket_types[0].capacity");

        let mut input = valid();
        input.sale_opens_at = "2027-04-01T10:00".into();
        assert_eq!(input.parse().unwrap_err().field, "sale_opens_at");

        let mut input = valid();
        input.ticket_types[0].max_per_order = "5".into();
        input.ticket_types[0].max_per_buyer = "2".into();
        assert_eq!(
            input.parse().unwrap_err().field,
            "ticket_types[0].max_per_buyer"
        );
    }

    #[test]
    fn a_nul_byte_names_its_field() {
        type Spoil = fn(&mut EventInput);
        let cases: [(Spoil, &str); 4] = [
            (|i| i.title = "Con\0cert".into(), "title"),
            (|i| i.venue = "Hall\0".into(), "venue"),
            (|i| i.description = "Doors\0at 7".into(), "description"),
            (
                |i| i.ticket_types[0].name = "\0".into(),
                "ticket_types[0].name",
            ),
        ];
        for (spoil, field) in cases {
            let mut input = valid();
            spoil(&mut input);
            assert_eq!(input.parse().unwrap_err().field, field);
        }
        let mut input = valid();
        input.description = "Doors at 7.\r\n\tBar open.".into();
        assert!(input.parse().is_ok());
    }
}
