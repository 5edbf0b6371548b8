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
/// The longest hold an organizer can choose (the suggested one is 10).
pub const MAX_HOLD_MINUTES: i64 = 120;
/// What the organizer form suggests for a held sale.
pub const DEFAULT_HOLD_MINUTES: i64 = 10;

/// A stored hold as the form's and the API's minutes (rounded up), blank
/// for none.
pub fn hold_minutes_text(hold_seconds: Option<i32>) -> String {
    hold_seconds
        .map(|s| (i64::from(s) + 59).div_euclid(60).to_string())
        .unwrap_or_default()
}
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
    /// Minutes an order is held for its buyer to confirm by mail; blank:
    /// orders are confirmed at once.
    pub hold_minutes: String,
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
    /// Only with a presale code (see `domain::PresaleCode`).
    pub hidden: bool,
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
    /// Orders held this long for the buyer's mailbox confirmation; `None`:
    /// confirmed at once.
    pub hold_seconds: Option<i32>,
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
    /// Shown and sold only with a presale code that unlocks it.
    pub hidden: bool,
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
        let hold_seconds = match self.hold_minutes.trim() {
            "" => None,
            raw => Some(whole(raw, 1, MAX_HOLD_MINUTES).for_field("hold_minutes")? as i32 * 60),
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
            hold_seconds,
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
            hidden: self.hidden,
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

    fn field_of(input: &EventInput) -> String {
        input.parse().unwrap_err().field
    }

    fn ticket_type(name: &str) -> TicketTypeInput {
        TicketTypeInput {
            name: name.into(),
            price: "10".into(),
            capacity: "5".into(),
            ..Default::default()
        }
    }

    #[test]
    fn blank_rows_are_ignored_but_not_rows_of_existing_ticket_types() {
        let mut input = valid();
        input.ticket_types.push(TicketTypeInput {
            currency: "USD".into(),
            max_per_order: "3".into(),
            ..Default::default()
        });
        assert_eq!(input.parse().unwrap().ticket_types.len(), 1);

        let existing = TicketTypeInput {
            id: Some(uuid::Uuid::new_v4().into()),
            ..Default::default()
        };
        assert!(!existing.is_blank());
        let mut input = valid();
        input.ticket_types.push(existing);
        assert_eq!(field_of(&input), "ticket_types[1].name");

        let mut input = valid();
        input.ticket_types.push(TicketTypeInput {
            price: "1".into(),
            ..Default::default()
        });
        assert_eq!(field_of(&input), "ticket_types[1].name");

        let mut input = valid();
        input.ticket_types = vec![TicketTypeInput::default()];
        assert_eq!(field_of(&input), "ticket_types");
    }

    #[test]
    fn texts_have_a_length_limit() {
        let mut input = valid();
        input.title = "t".repeat(200);
        input.description = "d".repeat(10_000);
        input.ticket_types[0].name = "n".repeat(100);
        assert!(input.parse().is_ok());

        let mut input = valid();
        input.title = "t".repeat(201);
        assert_eq!(field_of(&input), "title");
        let mut input = valid();
        input.description = "d".repeat(10_001);
        assert_eq!(field_of(&input), "description");
        let mut input = valid();
        input.ticket_types[0].name = "n".repeat(101);
        assert_eq!(field_of(&input), "ticket_types[0].name");
        let mut input = valid();
        input.venue = "  ".into();
        assert_eq!(field_of(&input), "venue");
    }

    #[test]
    fn the_sale_opens_before_the_start_and_closes_after_it_opens() {
        let mut input = valid();
        input.sale_opens_at = "2027-03-01T19:30".into();
        assert_eq!(field_of(&input), "sale_opens_at");

        let mut input = valid();
        input.sale_closes_at = "2027-01-01T10:00".into();
        assert_eq!(field_of(&input), "sale_closes_at");

        let mut input = valid();
        input.sale_closes_at = "2027-01-01T10:01".into();
        let event = input.parse().unwrap();
        assert_eq!(
            event.window.closes_at,
            Some(parse_datetime("2027-01-01T10:01").unwrap())
        );
        assert_eq!(
            event.window.opens_at,
            event.window.closes_at.unwrap() - time::Duration::MINUTE
        );
        assert_eq!(event.starts_at, event.window.starts_at);
        assert_eq!(valid().parse().unwrap().window.closes_at, None);
    }

    #[test]
    fn a_hold_is_blank_or_whole_minutes_within_two_hours() {
        assert_eq!(valid().parse().unwrap().hold_seconds, None);
        let mut input = valid();
        for (raw, seconds) in [("10", 600), (" 1 ", 60), ("120", 7200)] {
            input.hold_minutes = raw.into();
            assert_eq!(input.parse().unwrap().hold_seconds, Some(seconds), "{raw}");
        }
        for raw in ["0", "-5", "121", "1.5", "ten", "99999999999"] {
            input.hold_minutes = raw.into();
            assert_eq!(field_of(&input), "hold_minutes", "{raw}");
        }
    }

    #[test]
    fn status_and_the_event_limit_per_buyer() {
        let mut input = valid();
        input.status = " published ".into();
        input.max_per_buyer = "12".into();
        let event = input.parse().unwrap();
        assert_eq!(event.window.status, EventStatus::Published);
        assert_eq!(event.max_per_buyer, Some(12));
        assert_eq!(valid().parse().unwrap().max_per_buyer, None);

        let mut input = valid();
        input.status = "draft".into();
        assert_eq!(input.parse().unwrap().window.status, EventStatus::Draft);
        let mut input = valid();
        input.status = "cancelled".into();
        assert_eq!(field_of(&input), "status");
        for raw in ["0", "10001", "x"] {
            let mut input = valid();
            input.max_per_buyer = raw.into();
            assert_eq!(field_of(&input), "max_per_buyer", "{raw}");
        }
        let mut input = valid();
        input.max_per_buyer = "10000".into();
        assert_eq!(input.parse().unwrap().max_per_buyer, Some(10_000));
    }

    #[test]
    fn at_most_twenty_ticket_types_with_distinct_names() {
        let mut input = valid();
        input.ticket_types = (0..MAX_TICKET_TYPES)
            .map(|i| ticket_type(&format!("Type {i}")))
            .collect();
        assert_eq!(input.parse().unwrap().ticket_types.len(), MAX_TICKET_TYPES);
        input.ticket_types.push(ticket_type("One too many"));
        assert_eq!(field_of(&input), "ticket_types");

        let mut input = valid();
        input.ticket_types.push(ticket_type("Seated"));
        input.ticket_types.push(ticket_type("STANDING"));
        assert_eq!(field_of(&input), "ticket_types[2].name");
        let mut input = valid();
        input.ticket_types.push(ticket_type("Seated"));
        let event = input.parse().unwrap();
        let rows: Vec<_> = event
            .ticket_types
            .iter()
            .map(|t| (t.row, t.name.as_str()))
            .collect();
        assert_eq!(rows, [(0, "Standing"), (1, "Seated")]);
    }

    #[test]
    fn ticket_type_prices_and_currencies() {
        let mut input = valid();
        input.ticket_types[0].currency = "usd".into();
        let id = TicketTypeId::from(uuid::Uuid::new_v4());
        input.ticket_types[0].id = Some(id);
        let tt = &input.parse().unwrap().ticket_types[0];
        assert_eq!(tt.price.currency.as_str(), "USD");
        assert_eq!(tt.id, Some(id));
        assert_eq!(
            valid().parse().unwrap().ticket_types[0]
                .price
                .currency
                .as_str(),
            "EUR"
        );

        let mut input = valid();
        input.ticket_types[0].currency = "EURO".into();
        assert_eq!(field_of(&input), "ticket_types[0].currency");

        let mut input = valid();
        input.ticket_types[0].price_is_minor = true;
        input.ticket_types[0].price = "2599".into();
        assert_eq!(input.parse().unwrap().ticket_types[0].price.minor, 2599);
        for raw in ["25.99", "-1", "100000001"] {
            input.ticket_types[0].price = raw.into();
            assert_eq!(field_of(&input), "ticket_types[0].price_minor", "{raw}");
        }
        let mut input = valid();
        input.ticket_types[0].price = "2599".into();
        assert_eq!(input.parse().unwrap().ticket_types[0].price.minor, 259_900);
        input.ticket_types[0].price = "25.999".into();
        assert_eq!(field_of(&input), "ticket_types[0].price");
    }

    #[test]
    fn capacities_and_limits_per_order_and_buyer() {
        let limits = |capacity: &str, per_order: &str, per_buyer: &str| {
            let mut input = valid();
            input.ticket_types[0].capacity = capacity.into();
            input.ticket_types[0].max_per_order = per_order.into();
            input.ticket_types[0].max_per_buyer = per_buyer.into();
            input
                .parse()
                .map(|e| {
                    let t = &e.ticket_types[0];
                    (t.capacity, t.max_per_order, t.max_per_buyer)
                })
                .map_err(|e| e.field)
        };
        // Without a limit per order: 10, or the capacity when smaller (but 1
        // at least); without a limit per buyer: the limit per order.
        assert_eq!(limits("0", "", ""), Ok((0, 1, 1)));
        assert_eq!(limits("3", "", ""), Ok((3, 3, 3)));
        assert_eq!(limits("1000000", "", ""), Ok((1_000_000, 10, 10)));
        assert_eq!(limits("5", "100", "100"), Ok((5, 100, 100)));
        assert_eq!(limits("5", "1", ""), Ok((5, 1, 1)));
        assert_eq!(limits("5", "4", "4"), Ok((5, 4, 4)));
        assert_eq!(limits("5", "4", "10000"), Ok((5, 4, 10_000)));
        assert_eq!(limits("5", "", "7"), Ok((5, 5, 7)));
        let field = |name: &str| Err(format!("ticket_types[0].{name}"));
        assert_eq!(limits("1000001", "", ""), field("capacity"));
        assert_eq!(limits("", "", ""), field("capacity"));
        assert_eq!(limits("2.5", "", ""), field("capacity"));
        assert_eq!(limits("5", "0", ""), field("max_per_order"));
        assert_eq!(limits("5", "101", ""), field("max_per_order"));
        assert_eq!(limits("5", "4", "3"), field("max_per_buyer"));
        assert_eq!(limits("5", "4", "10001"), field("max_per_buyer"));
        assert_eq!(limits("5", "4", "0"), field("max_per_buyer"));
    }

    #[test]
    fn date_times_in_rfc_3339_or_the_form_format() {
        use time::macros::datetime;
        assert_eq!(
            parse_datetime("2027-03-01T19:30:00+02:00"),
            Ok(datetime!(2027-03-01 17:30 UTC))
        );
        assert_eq!(
            parse_datetime(" 2027-03-01T19:30 "),
            Ok(datetime!(2027-03-01 19:30 UTC))
        );
        assert_eq!(
            parse_datetime("2027-03-01T19:30:15"),
            Ok(datetime!(2027-03-01 19:30:15 UTC))
        );
        assert_eq!(
            parse_datetime(" "),
            Err("This field is required.".to_owned())
        );
        assert_eq!(
            parse_datetime("1 March"),
            Err("\"1 March\" is not a date and time such as 2027-03-01T19:30.".to_owned())
        );
    }
}
