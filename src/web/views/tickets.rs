//! "Find my tickets": a buyer who lost their order's link asks for a mail
//! with the links of their orders.

use maud::{Markup, html};

use super::{FormError, csrf_field, error_notice, invalid, layout};
use crate::web::extract::PageContext;

/// The form; once sent, the same words whatever the address holds (so
/// nobody learns whether an address has orders here).
pub fn find_page(ctx: &PageContext, email: &str, error: Option<&FormError>, sent: bool) -> Markup {
    layout(
        ctx,
        "Find my tickets",
        html! {
            article.card {
                h1 { "Find my tickets" }
                @if sent {
                    p.notice.success role="status" {
                        "If there are orders for " strong { (email) } ", a mail with their links is on its way. "
                        "It can take a few minutes; look in your spam folder too. "
                        "One such mail goes to an address every ten minutes at most."
                    }
                } @else {
                    p { "Lost the link to your order? Give the address you bought with: we mail it the links of all its orders." }
                }
                form method="post" action="/tickets" data-once {
                    (csrf_field(ctx))
                    (error_notice(error))
                    label for="email" { "Email" }
                    input #email type="email" name="email" required maxlength="254" autocomplete="email"
                        value=(email) aria-invalid=[invalid(error, "email")];
                    button type="submit" { "Mail me my tickets" }
                }
            }
        },
    )
}
