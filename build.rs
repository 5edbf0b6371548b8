// sqlx::migrate!() embeds migrations/ and the query_file! macros read sql/
// at compile time: rebuild when either changes.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
    println!("cargo:rerun-if-changed=sql");
}
