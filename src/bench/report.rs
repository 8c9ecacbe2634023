//! Figures, their targets, and the table and JSON they are printed as.

use super::Workload;

/// What a figure must reach to meet its target.
#[derive(Debug, Clone, Copy)]
pub enum Goal {
    /// The ratio to the floor is at least this.
    RatioAtLeast(f64),
    /// The ratio to the floor is at most this.
    RatioAtMost(f64),
    /// The value is at least this.
    AtLeast(f64),
    /// The value is at most this.
    AtMost(f64),
    /// The value is exactly this (a correctness check).
    Exactly(f64),
}

impl Goal {
    fn met(self, value: f64, ratio: Option<f64>) -> bool {
        match self {
            Self::RatioAtLeast(bound) => ratio.is_some_and(|ratio| ratio >= bound),
            Self::RatioAtMost(bound) => ratio.is_some_and(|ratio| ratio <= bound),
            Self::AtLeast(bound) => value >= bound,
            Self::AtMost(bound) => value <= bound,
            Self::Exactly(bound) => value == bound,
        }
    }

    fn describe(self, unit: Unit) -> String {
        match self {
            Self::RatioAtLeast(bound) => format!("ratio >= {bound}"),
            Self::RatioAtMost(bound) => format!("ratio <= {bound}"),
            Self::AtLeast(bound) => format!(">= {}", unit.format(bound)),
            Self::AtMost(bound) => format!("<= {}", unit.format(bound)),
            Self::Exactly(bound) => format!("= {}", unit.format(bound)),
        }
    }
}

/// How a figure's value is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Operations per second.
    PerSecond,
    /// A duration, stored in milliseconds.
    Millis,
    /// A share, stored as a percentage.
    Percent,
    /// A plain count.
    Count,
    /// A count per operation, e.g. scripts per acquisition.
    PerOp,
    /// Memory.
    Bytes,
}

impl Unit {
    fn format(self, value: f64) -> String {
        match self {
            Self::PerSecond => format!("{value:.0}/s"),
            Self::Millis if value < 1.0 => format!("{:.0} µs", value * 1_000.0),
            Self::Millis => format!("{value:.2} ms"),
            Self::Percent => format!("{value:.1}%"),
            Self::Count => format!("{value:.0}"),
            Self::PerOp => format!("{value:.2}"),
            Self::Bytes => format!("{value:.0} B"),
        }
    }

    fn json_name(self) -> &'static str {
        match self {
            Self::PerSecond => "per_second",
            Self::Millis => "ms",
            Self::Percent => "percent",
            Self::Count => "count",
            Self::PerOp => "per_op",
            Self::Bytes => "bytes",
        }
    }
}

/// One measured figure, next to its floor.
#[derive(Debug, Clone)]
pub struct Figure {
    /// Which workload measured it.
    pub workload: Workload,
    /// What was measured, e.g. `cycles/s`.
    pub metric: &'static str,
    /// holdlock's figure.
    pub value: f64,
    /// How the value is written.
    pub unit: Unit,
    /// What the floor is, and its figure for the same metric.
    pub floor: Option<(&'static str, f64)>,
    /// The target, if the issue sets one.
    pub goal: Option<Goal>,
}

impl Figure {
    /// A figure with no floor and no target yet.
    pub fn new(workload: Workload, metric: &'static str, value: f64, unit: Unit) -> Self {
        Self {
            workload,
            metric,
            value,
            unit,
            floor: None,
            goal: None,
        }
    }

    /// Measured next to the floor `name`, whose figure is `value`.
    pub fn floor(mut self, name: &'static str, value: f64) -> Self {
        self.floor = Some((name, value));
        self
    }

    /// The target this figure must meet.
    pub fn goal(mut self, goal: Goal) -> Self {
        self.goal = Some(goal);
        self
    }

    /// holdlock's figure divided by the floor's.
    pub fn ratio(&self) -> Option<f64> {
        self.floor
            .map(|(_, floor)| self.value / floor)
            .filter(|ratio| ratio.is_finite())
    }

    /// Whether the target is met (`None` if there is none).
    pub fn met(&self) -> Option<bool> {
        self.goal.map(|goal| goal.met(self.value, self.ratio()))
    }
}

/// The figures as a plain-text table.
pub fn table(figures: &[Figure]) -> String {
    let mut rows = vec![
        [
            "WORKLOAD", "METRIC", "HOLDLOCK", "FLOOR", "FLOOR IS", "RATIO", "TARGET", "MET",
        ]
        .map(str::to_owned)
        .to_vec(),
    ];
    for figure in figures {
        let (floor_name, floor_value) = figure
            .floor
            .map_or(("-".to_owned(), "-".to_owned()), |(name, value)| {
                (name.to_owned(), figure.unit.format(value))
            });
        rows.push(vec![
            figure.workload.label().to_owned(),
            figure.metric.to_owned(),
            figure.unit.format(figure.value),
            floor_value,
            floor_name,
            figure
                .ratio()
                .map_or_else(|| "-".to_owned(), |ratio| format!("{ratio:.2}x")),
            figure
                .goal
                .map_or_else(|| "-".to_owned(), |goal| goal.describe(figure.unit)),
            match figure.met() {
                None => "-",
                Some(true) => "yes",
                Some(false) => "NO",
            }
            .to_owned(),
        ]);
    }
    columns(&rows)
}

/// The figures as JSON, one object per figure.
pub fn json(figures: &[Figure]) -> serde_json::Value {
    figures
        .iter()
        .map(|figure| {
            serde_json::json!({
                "workload": figure.workload.label(),
                "metric": figure.metric,
                "value": figure.value,
                "unit": figure.unit.json_name(),
                "floor": figure.floor.map(|(_, value)| value),
                "floor_is": figure.floor.map(|(name, _)| name),
                "ratio": figure.ratio(),
                "target": figure.goal.map(|goal| goal.describe(figure.unit)),
                "met": figure.met(),
            })
        })
        .collect()
}

/// Left-aligned columns separated by two spaces; the last column is not padded. The
/// CLI's tables escape their cells, as lock names come from outside; a figure's cells
/// are this module's own text and numbers, so they are printed as they are.
fn columns(rows: &[Vec<String>]) -> String {
    let widths = |column: usize| {
        rows.iter()
            .filter_map(|row| row.get(column))
            .map(|cell| cell.chars().count())
            .max()
            .unwrap_or(0)
    };
    let widths: Vec<usize> = (0..rows.iter().map(Vec::len).max().unwrap_or(0))
        .map(widths)
        .collect();
    let mut out = String::new();
    for row in rows {
        for (column, cell) in row.iter().enumerate() {
            if column + 1 == row.len() {
                out.push_str(cell);
            } else {
                out.push_str(&format!("{cell:<width$}  ", width = widths[column]));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec!["A".to_owned(), "BB".to_owned(), "C".to_owned()],
            vec!["long".to_owned(), "µs".to_owned(), "y".to_owned()],
        ];
        assert_eq!(columns(&rows), "A     BB  C\nlong  µs  y\n");
    }

    #[test]
    fn a_figure_shows_its_floor_ratio_and_target() {
        let figure = Figure::new(Workload::W1, "cycles/s", 900.0, Unit::PerSecond)
            .floor("bare lock", 1_000.0)
            .goal(Goal::RatioAtLeast(0.9));
        assert_eq!(figure.met(), Some(true));
        let printed = table(std::slice::from_ref(&figure));
        let row = printed.lines().nth(1).unwrap_or_default();
        assert_eq!(
            row.split("  ")
                .map(str::trim)
                .filter(|cell| !cell.is_empty())
                .collect::<Vec<_>>(),
            [
                "W1",
                "cycles/s",
                "900/s",
                "1000/s",
                "bare lock",
                "0.90x",
                "ratio >= 0.9",
                "yes"
            ]
        );
        assert_eq!(json(&[figure])[0]["met"], true);
        let broken =
            Figure::new(Workload::W2, "winners", 2.0, Unit::Count).goal(Goal::Exactly(1.0));
        assert_eq!(broken.met(), Some(false));
        assert!(table(&[broken]).ends_with("NO\n"));
    }
}
