//! The SVG renderer: charts described as data ([`BarChart`], [`LineChart`]) and drawn
//! one way, so every chart of the report reads alike: the legend in its own column
//! beside the plot (never over the data), category labels wrapped to their slot, log
//! axes labelled only at 1, 2 and 5 times a power of ten (or at powers of two for
//! sizes), and the paper's value drawn as a dashed reference beside ours.

use anyhow::Result;
use plotters::coord::ranged1d::ValueFormatter;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

pub use plotters::style::RGBColor;

use hscm_lab::units::human_bytes;

/// The report's palette: ours first, then baselines.
pub const BLUE: RGBColor = RGBColor(31, 119, 180);
pub const RED: RGBColor = RGBColor(214, 39, 40);
pub const ORANGE: RGBColor = RGBColor(255, 127, 14);
pub const GREEN: RGBColor = RGBColor(44, 160, 44);
pub const GREY: RGBColor = RGBColor(127, 127, 127);
pub const DARK_GREY: RGBColor = RGBColor(90, 90, 90);
pub const BLACK_ISH: RGBColor = RGBColor(30, 30, 30);
pub const PURPLE: RGBColor = RGBColor(148, 103, 189);

/// Width of the legend column right of the plot: room for the swatch and the longest
/// label, so no entry is cut off.
fn legend_width<'a>(labels: impl IntoIterator<Item = &'a str>) -> u32 {
    let chars = labels
        .into_iter()
        .map(|l| l.chars().count())
        .max()
        .unwrap_or(0);
    40 + (chars as f64 * (LABEL_FONT + 1) as f64 * 0.58) as u32
}
const LABEL_FONT: u32 = 11;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// How an axis maps and labels its values.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Axis {
    Linear,
    /// Logarithmic; ticks labelled at 1, 2 and 5 times powers of ten, in SI units.
    Log10,
    /// Logarithmic in base 2, for sizes in bytes; ticks labelled at powers of two.
    Log2Bytes,
}

/// A dashed horizontal line marking a published value.
#[derive(Debug, Clone)]
pub struct Reference {
    pub label: String,
    pub value: f64,
    /// Only over this category of a bar chart; `None` spans the whole chart.
    pub category: Option<usize>,
    pub color: RGBColor,
}

#[derive(Debug, Clone)]
pub struct Bars {
    pub name: String,
    pub color: RGBColor,
    /// One value per category; `None` draws no bar.
    pub values: Vec<Option<f64>>,
}

/// Grouped bars, one group per category.
#[derive(Debug, Clone)]
pub struct BarChart {
    pub title: String,
    pub y_desc: String,
    pub y_axis: Axis,
    pub categories: Vec<String>,
    pub series: Vec<Bars>,
    /// A solid line all bars are read against (1.0 for normalised figures).
    pub baseline: Option<f64>,
    pub references: Vec<Reference>,
    pub size: (u32, u32),
}

#[derive(Debug, Clone)]
pub struct Line {
    pub name: String,
    pub color: RGBColor,
    pub points: Vec<(f64, f64)>,
}

#[derive(Debug, Clone)]
pub struct LineChart {
    pub title: String,
    pub x_desc: String,
    pub y_desc: String,
    pub x_axis: Axis,
    pub y_axis: Axis,
    pub lines: Vec<Line>,
    pub baseline: Option<f64>,
    pub references: Vec<Reference>,
    pub size: (u32, u32),
}

/// A tick label on a log axis: kept at 1, 2 and 5 times a power of ten, blank elsewhere,
/// so a decade never carries nine labels on top of each other.
pub fn log10_tick(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let decade = 10f64.powf(v.log10().floor());
    let mantissa = v / decade;
    if [1.0, 2.0, 5.0, 10.0]
        .iter()
        .any(|m| (mantissa - m).abs() < 1e-6)
    {
        si(v)
    } else {
        String::new()
    }
}

/// 1500 -> "1.5k", 2e6 -> "2M", 0.5 -> "0.5".
pub fn si(v: f64) -> String {
    let (scaled, suffix) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    let text = format!("{scaled:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{text}{suffix}")
}

/// A label on a log2 axis of sizes: "4 KiB" at whole powers of two, blank between.
fn log2_tick(v: f64) -> String {
    if (v - v.round()).abs() < 1e-6 && (0.0..63.0).contains(&v) {
        human_bytes(1u64 << (v.round() as u32))
    } else {
        String::new()
    }
}

fn tick(axis: Axis, v: f64) -> String {
    match axis {
        Axis::Linear => si(v),
        Axis::Log10 => log10_tick(v),
        Axis::Log2Bytes => log2_tick(v),
    }
}

/// Splits a label into lines of at most `width` characters, breaking after '-' or at
/// spaces, so neighbouring category labels never run into each other.
pub fn wrap_label(label: &str, width: usize) -> Vec<String> {
    let mut words: Vec<String> = Vec::new();
    for part in label.split(' ') {
        let mut rest = part;
        while let Some(i) = rest.find('-') {
            words.push(rest[..=i].to_string());
            rest = &rest[i + 1..];
        }
        if !rest.is_empty() {
            words.push(rest.to_string());
        }
    }
    let mut lines: Vec<String> = Vec::new();
    for w in words {
        match lines.last_mut() {
            Some(l) if l.chars().count() + w.chars().count() < width => {
                if !l.ends_with('-') {
                    l.push(' ');
                }
                l.push_str(&w);
            }
            _ => lines.push(w),
        }
    }
    lines
}

/// Draws into a string: the caller draws the plot, then the legend is drawn in its own
/// column to the right.
fn render(
    size: (u32, u32),
    legend: &[(String, Swatch)],
    draw: impl FnOnce(&Area<'_>) -> Result<()>,
) -> Result<String> {
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        root.fill(&WHITE)?;
        let width = legend_width(legend.iter().map(|(l, _)| l.as_str()));
        let (plot, legend_area) = root.split_horizontally(size.0.saturating_sub(width));
        draw(&plot)?;
        draw_legend(&legend_area, legend)?;
        root.present()?;
    }
    Ok(svg)
}

enum Swatch {
    Bar(RGBColor),
    Line(RGBColor),
    Dashed(RGBColor),
}

/// The legend, stacked in its own column, aligned with the top of the plot.
fn draw_legend(area: &Area<'_>, entries: &[(String, Swatch)]) -> Result<()> {
    let style = TextStyle::from(("sans-serif", LABEL_FONT + 1).into_font())
        .pos(Pos::new(HPos::Left, VPos::Center));
    for (i, (label, swatch)) in entries.iter().enumerate() {
        let y = 60 + 20 * i as i32;
        match swatch {
            Swatch::Bar(c) => area.draw(&Rectangle::new([(8, y - 5), (20, y + 5)], c.filled()))?,
            Swatch::Line(c) => {
                area.draw(&PathElement::new(vec![(4, y), (24, y)], c.stroke_width(2)))?
            }
            Swatch::Dashed(c) => {
                for x in [4, 12, 20] {
                    area.draw(&PathElement::new(
                        vec![(x, y), (x + 5, y)],
                        c.stroke_width(2),
                    ))?;
                }
            }
        }
        area.draw(&Text::new(label.clone(), (30, y), style.clone()))?;
    }
    Ok(())
}

fn reference_entries(references: &[Reference]) -> Vec<(String, Swatch)> {
    let mut seen: Vec<&str> = Vec::new();
    references
        .iter()
        .filter(|r| {
            let new = !seen.contains(&r.label.as_str());
            seen.push(&r.label);
            new
        })
        .map(|r| (r.label.clone(), Swatch::Dashed(r.color)))
        .collect()
}

/// A dashed horizontal segment from x0 to x1 at y, in data coordinates.
fn dashed<DB: DrawingBackend>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<RangedCoordf64, impl Ranged<ValueType = f64>>>,
    x0: f64,
    x1: f64,
    y: f64,
    color: RGBColor,
) -> Result<()>
where
    DB::ErrorType: 'static,
{
    let steps = (((x1 - x0) * 12.0).ceil() as usize).max(2);
    let dx = (x1 - x0) / steps as f64;
    let dashes = (0..steps).step_by(2).map(|i| {
        let a = x0 + dx * i as f64;
        PathElement::new(vec![(a, y), ((a + dx).min(x1), y)], color.stroke_width(2))
    });
    chart
        .draw_series(dashes)
        .map_err(|e| anyhow::anyhow!("drawing a reference line: {e}"))?;
    Ok(())
}

impl BarChart {
    pub fn to_svg(&self) -> Result<String> {
        let n = self.categories.len().max(1);
        let values = || self.series.iter().flat_map(|s| s.values.iter().flatten());
        let refs = self.references.iter().map(|r| r.value);
        let top = values()
            .copied()
            .chain(refs)
            .chain(self.baseline)
            .fold(f64::MIN_POSITIVE, f64::max);
        let floor = match self.y_axis {
            Axis::Linear => 0.0,
            _ => {
                let low = values().copied().filter(|v| *v > 0.0).fold(top, f64::min);
                10f64.powf(low.log10().floor())
            }
        };
        let mut entries: Vec<(String, Swatch)> = self
            .series
            .iter()
            .map(|s| (s.name.clone(), Swatch::Bar(s.color)))
            .collect();
        entries.extend(reference_entries(&self.references));
        // The widest category decides how many lines its label needs.
        let legend_px = legend_width(entries.iter().map(|(l, _)| l.as_str()));
        let slot_px = self.size.0.saturating_sub(legend_px + 80) / n as u32;
        let chars = ((slot_px as f64 / (LABEL_FONT as f64 * 0.6)) as usize).max(4);
        let labels: Vec<Vec<String>> = self
            .categories
            .iter()
            .map(|c| wrap_label(c, chars))
            .collect();
        let lines = labels.iter().map(Vec::len).max().unwrap_or(1) as u32;
        render(self.size, &entries, |plot| {
            let mut builder = ChartBuilder::on(plot);
            builder
                .caption(&self.title, ("sans-serif", 17))
                .margin(10)
                .x_label_area_size(14 + lines * (LABEL_FONT + 2))
                .y_label_area_size(64);
            let x = 0f64..n as f64;
            match self.y_axis {
                Axis::Linear => {
                    let mut chart = builder.build_cartesian_2d(x, floor..top * 1.08)?;
                    self.draw(plot, &mut chart, floor, &labels)
                }
                _ => {
                    let mut chart =
                        builder.build_cartesian_2d(x, (floor..top * 1.5).log_scale())?;
                    self.draw(plot, &mut chart, floor, &labels)
                }
            }
        })
    }

    fn draw<'a, Y: Ranged<ValueType = f64> + ValueFormatter<f64>>(
        &self,
        plot: &Area<'a>,
        chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<RangedCoordf64, Y>>,
        floor: f64,
        labels: &[Vec<String>],
    ) -> Result<()> {
        let y_axis = self.y_axis;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .y_labels(12)
            .light_line_style(TRANSPARENT)
            .y_label_formatter(&|v| tick(y_axis, *v))
            .y_desc(self.y_desc.as_str())
            .draw()?;
        let style = TextStyle::from(("sans-serif", LABEL_FONT).into_font())
            .pos(Pos::new(HPos::Center, VPos::Top));
        for (i, lines) in labels.iter().enumerate() {
            let (px, py) = chart.backend_coord(&(i as f64 + 0.5, floor));
            for (k, line) in lines.iter().enumerate() {
                let y = py + 6 + k as i32 * (LABEL_FONT as i32 + 2);
                plot.draw(&Text::new(line.clone(), (px, y), style.clone()))?;
            }
        }
        let width = 0.8 / self.series.len().max(1) as f64;
        for (s, series) in self.series.iter().enumerate() {
            let color = series.color;
            chart.draw_series(series.values.iter().enumerate().filter_map(|(i, v)| {
                let v = (*v)?;
                let x0 = i as f64 + 0.1 + s as f64 * width;
                (v > floor)
                    .then(|| Rectangle::new([(x0, floor), (x0 + width * 0.92, v)], color.filled()))
            }))?;
        }
        let n = self.categories.len() as f64;
        if let Some(b) = self.baseline {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(0.0, b), (n, b)],
                BLACK,
            )))?;
        }
        for r in &self.references {
            let (x0, x1) = r
                .category
                .map_or((0.0, n), |c| (c as f64 + 0.05, c as f64 + 0.95));
            dashed(chart, x0, x1, r.value, r.color)?;
        }
        Ok(())
    }
}

impl LineChart {
    pub fn to_svg(&self) -> Result<String> {
        let xs = || self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.0));
        let ys = || self.lines.iter().flat_map(|l| l.points.iter().map(|p| p.1));
        let (x_lo, x_hi) = xs().fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
            (a.min(x), b.max(x))
        });
        let y_top = ys()
            .chain(self.references.iter().map(|r| r.value))
            .chain(self.baseline)
            .fold(f64::MIN_POSITIVE, f64::max);
        let y_low = ys().fold(y_top, f64::min);
        if !x_lo.is_finite() {
            anyhow::bail!("chart {:?} has no points", self.title);
        }
        // Log2 axes are drawn in exponents, so their ticks fall on powers of two.
        let to_x = |x: f64| match self.x_axis {
            Axis::Log2Bytes => x.log2(),
            _ => x,
        };
        let (x0, x1) = (to_x(x_lo), to_x(x_hi));
        let mut entries: Vec<(String, Swatch)> = self
            .lines
            .iter()
            .map(|l| (l.name.clone(), Swatch::Line(l.color)))
            .collect();
        entries.extend(reference_entries(&self.references));
        render(self.size, &entries, |plot| {
            let mut builder = ChartBuilder::on(plot);
            builder
                .caption(&self.title, ("sans-serif", 17))
                .margin(12)
                .x_label_area_size(40)
                .y_label_area_size(60);
            match (self.x_axis, self.y_axis) {
                (Axis::Log10, Axis::Linear) => {
                    let mut c = builder
                        .build_cartesian_2d((x0 * 0.9..x1 * 1.1).log_scale(), 0f64..y_top * 1.1)?;
                    self.draw(&mut c, &to_x)
                }
                (Axis::Log10, _) => {
                    let mut c = builder.build_cartesian_2d(
                        (x0 * 0.9..x1 * 1.1).log_scale(),
                        (y_low * 0.9..y_top * 1.3).log_scale(),
                    )?;
                    self.draw(&mut c, &to_x)
                }
                (_, Axis::Linear) => {
                    let mut c = builder.build_cartesian_2d(x0..x1, 0f64..y_top * 1.1)?;
                    self.draw(&mut c, &to_x)
                }
                (_, _) => {
                    let mut c = builder
                        .build_cartesian_2d(x0..x1, (y_low * 0.9..y_top * 1.3).log_scale())?;
                    self.draw(&mut c, &to_x)
                }
            }
        })
    }

    fn draw<'a, X, Y>(
        &self,
        chart: &mut ChartContext<'a, SVGBackend<'a>, Cartesian2d<X, Y>>,
        to_x: &dyn Fn(f64) -> f64,
    ) -> Result<()>
    where
        X: Ranged<ValueType = f64> + ValueFormatter<f64>,
        Y: Ranged<ValueType = f64> + ValueFormatter<f64>,
    {
        let (x_axis, y_axis) = (self.x_axis, self.y_axis);
        let x_range = chart.x_range();
        let x_labels = match x_axis {
            // One label per power of two.
            Axis::Log2Bytes => (x_range.end - x_range.start).round() as usize + 1,
            _ => 12,
        };
        chart
            .configure_mesh()
            .x_labels(x_labels)
            .y_labels(12)
            .light_line_style(TRANSPARENT)
            .x_label_formatter(&|v| tick(x_axis, *v))
            .y_label_formatter(&|v| tick(y_axis, *v))
            .x_desc(self.x_desc.as_str())
            .y_desc(self.y_desc.as_str())
            .draw()?;
        if let Some(b) = self.baseline {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x_range.start, b), (x_range.end, b)],
                BLACK,
            )))?;
        }
        for l in &self.lines {
            let c = l.color;
            chart.draw_series(LineSeries::new(
                l.points.iter().map(|&(x, y)| (to_x(x), y)),
                c.stroke_width(2),
            ))?;
        }
        for r in &self.references {
            let steps = 40;
            let dx = (x_range.end - x_range.start) / steps as f64;
            chart.draw_series((0..steps).step_by(2).map(|i| {
                let a = x_range.start + dx * i as f64;
                PathElement::new(
                    vec![(a, r.value), (a + dx, r.value)],
                    r.color.stroke_width(2),
                )
            }))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_label_one_two_five_per_decade_only() {
        let labelled: Vec<String> = (1..=10)
            .map(|k| log10_tick(k as f64 * 1000.0))
            .filter(|s| !s.is_empty())
            .collect();
        assert_eq!(labelled, ["1k", "2k", "5k", "10k"]);
        assert_eq!(log10_tick(3e6), "");
        assert_eq!(log10_tick(0.0), "");
    }

    #[test]
    fn size_ticks_fall_on_powers_of_two() {
        assert_eq!(log2_tick(12.0), "4 KiB");
        assert_eq!(log2_tick(12.5), "");
    }

    #[test]
    fn long_labels_wrap_to_their_slot() {
        let lines = wrap_label("randwrite-4k-8t-immediate-journal-eighth", 12);
        assert!(lines.iter().all(|l| l.chars().count() <= 12), "{lines:?}");
        assert_eq!(lines.concat(), "randwrite-4k-8t-immediate-journal-eighth");
        assert_eq!(wrap_label("gcc 2k", 20), ["gcc 2k"]);
    }

    /// The x of every `<text>` element whose content is `text`.
    fn text_x_positions(svg: &str, text: &str) -> Vec<f64> {
        svg.split("<text")
            .skip(1)
            .filter(|element| {
                let content = element.split_once('>').map_or("", |(_, c)| c);
                content.split("</text>").next().map(str::trim) == Some(text)
            })
            .filter_map(|element| {
                let at = element.find(" x=\"")? + 4;
                element[at..].split('"').next()?.parse().ok()
            })
            .collect()
    }

    #[test]
    fn the_legend_stands_beside_the_plot_not_on_it() {
        let chart = BarChart {
            title: "t".into(),
            y_desc: "IOPS".into(),
            y_axis: Axis::Log10,
            categories: vec!["a".into(), "b".into()],
            series: vec![Bars {
                name: "legend-entry".into(),
                color: BLUE,
                values: vec![Some(1e3), Some(1e6)],
            }],
            baseline: None,
            references: vec![Reference {
                label: "paper-entry".into(),
                value: 5e5,
                category: Some(1),
                color: RED,
            }],
            size: (700, 300),
        };
        let svg = chart.to_svg().unwrap();
        let plot_right = (700 - legend_width(["legend-entry", "paper-entry"])) as f64;
        for entry in ["legend-entry", "paper-entry"] {
            let xs = text_x_positions(&svg, entry);
            assert!(!xs.is_empty(), "{entry} not drawn");
            assert!(xs.iter().all(|x| *x >= plot_right), "{entry} at {xs:?}");
        }
    }
}
