//! `stampede-load table`: `run --json` reports as one markdown table. Runs
//! that share a label are repeats: the row shows the one with the median
//! throughput, and how many runs there were.

use std::fmt::Write as _;

use anyhow::Context;

use crate::{cli::TableArgs, report::Report};

pub fn print(args: &TableArgs) -> anyhow::Result<()> {
    let mut reports = Vec::new();
    for file in &args.files {
        let text =
            std::fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        for (i, line) in text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            let report: Report = serde_json::from_str(line)
                .with_context(|| format!("{}:{}: not a report", file.display(), i + 1))?;
            reports.push(report);
        }
    }
    print!("{}", render(reports));
    Ok(())
}

/// Throughput of a run: committed orders per second where it buys,
/// answers per second otherwise.
fn throughput(r: &Report) -> f64 {
    r.committed_per_sec
        .filter(|_| r.via != "get" && r.scenario != "sellout")
        .unwrap_or(r.attempts_per_sec)
}

pub fn render(reports: Vec<Report>) -> String {
    // Group by label, in the order labels first appear.
    let mut groups: Vec<(String, Vec<Report>)> = Vec::new();
    for report in reports {
        match groups.iter_mut().find(|(label, _)| *label == report.label) {
            Some((_, runs)) => runs.push(report),
            None => groups.push((report.label.clone(), vec![report])),
        }
    }
    let mut out = String::from(
        "| run | via | load | attempts/s | committed/s | refused/s | errors | p50 ms | p95 ms | p99 ms | max ms | server CPU µs/attempt | invariants | runs |\n\
         | --- | --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |\n",
    );
    for (label, mut runs) in groups {
        runs.sort_by(|a, b| throughput(a).total_cmp(&throughput(b)));
        let n = runs.len();
        let r = &runs[(n - 1) / 2];
        let latency = r.latency_ms.get("attempt").copied().unwrap_or_default();
        let load = match r.rate {
            Some(rate) => format!("{rate:.0}/s open"),
            None => format!("{} buyers", r.concurrency),
        };
        let or_dash = |v: Option<String>| v.unwrap_or_else(|| "—".to_owned());
        let invariants = or_dash(
            r.invariants
                .as_ref()
                .map(|i| if i.ok { "OK" } else { "FAILED" }.to_owned()),
        );
        let _ = writeln!(
            out,
            "| {label} | {} | {load} | {:.0} | {} | {:.0} | {} | {:.1} | {:.1} | {:.1} | {:.0} | {} | {invariants} | {n} |",
            r.via,
            r.attempts_per_sec,
            or_dash(r.committed_per_sec.map(|c| format!("{c:.0}"))),
            r.refused_per_sec,
            errors(r),
            latency.p50,
            latency.p95,
            latency.p99,
            latency.max,
            or_dash(r.server_cpu_us_per_attempt.map(|c| format!("{c:.0}"))),
        );
    }
    out
}

/// "0", or the count with its kinds: "12 (timeout 10, http_500 2)".
fn errors(r: &Report) -> String {
    if r.errors_total == 0 {
        return "0".to_owned();
    }
    let kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
    format!("{} ({})", r.errors_total, kinds.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(label: &str, per_sec: f64) -> Report {
        Report {
            label: label.to_owned(),
            scenario: "hot".to_owned(),
            via: "api".to_owned(),
            committed_per_sec: Some(per_sec),
            ..Report::default()
        }
    }

    #[test]
    fn repeats_of_a_label_show_the_median_run() {
        let table = render(vec![
            run("hot@16", 900.0),
            run("hot@16", 1100.0),
            run("hot@16", 1000.0),
        ]);
        let rows: Vec<&str> = table.lines().skip(2).collect();
        assert_eq!(rows.len(), 1);
        assert!(rows[0].contains("| 1000 |"), "{table}");
        assert!(rows[0].ends_with("| 3 |"), "{table}");
    }
}
