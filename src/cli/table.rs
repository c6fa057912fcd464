//! `dtcast table`: the promotion table as markdown, or the promotion order's Hasse diagram.

use std::io::Write;

use dtcast_dtype::{Category, DType};
use dtcast_promote::Policy;

use super::args::{TableArgs, TableFormat};
use super::CmdError;

pub(crate) fn run(args: &TableArgs, out: &mut dyn Write) -> Result<(), CmdError> {
    let policy = super::promote::policy(&args.policy)?;
    // The policy's dtypes (torch's lattice lacks ml_dtypes' float8_e4m3, float6, float4...).
    let dtypes: Vec<DType> = DType::ALL
        .into_iter()
        .filter(|&d| policy.has_dtype(d))
        .collect();
    match args.format {
        TableFormat::Markdown => markdown(policy.as_ref(), &dtypes, out),
        TableFormat::Dot => dot(policy.as_ref(), &dtypes, out),
        TableFormat::Svg => svg(policy.as_ref(), &dtypes, out),
    }
}

/// Each category's row in the SVG: its label and fill.
const CATEGORY_ROWS: [(Category, &str, &str); 5] = [
    (Category::Bool, "bool", "#dddddd"),
    (Category::UnsignedInt, "unsigned", "#fff3b0"),
    (Category::SignedInt, "signed", "#b8e6b8"),
    (Category::Floating, "floating", "#b3d4f5"),
    (Category::Complex, "complex", "#f5c0d0"),
];

/// The Hasse diagram drawn in-process, deterministically: one row per category (top to bottom:
/// bool, unsigned, signed, floating, complex), each row ordered by depth in the diagram (the
/// longest chain below a dtype) and placed at that depth's column where room allows; edges run
/// from a dtype to the dtypes that cover it, arrowheads at the wider type.
fn svg(policy: &dyn Policy, dtypes: &[DType], out: &mut dyn Write) -> Result<(), CmdError> {
    const COLUMN: f64 = 150.0;
    const ROW: f64 = 120.0;
    const HEIGHT: f64 = 40.0;
    const GAP: f64 = 16.0;
    const LEFT: f64 = 100.0;
    const TOP: f64 = 70.0;
    let edges = hasse_edges(policy, dtypes);
    // Depth: the longest chain of covers below each dtype (the order is finite and acyclic).
    let mut depth = vec![0usize; dtypes.len()];
    let at = |d: DType| dtypes.iter().position(|&x| x == d).expect("a listed dtype");
    for _ in 0..dtypes.len() {
        for &(a, b) in &edges {
            depth[at(b)] = depth[at(b)].max(depth[at(a)] + 1);
        }
    }
    let kept: Vec<String> = dtypes.iter().map(|&d| kept_scalars(policy, d)).collect();
    let width = |d: DType| {
        let i = at(d);
        (8.0 * d.name().len() as f64).max(6.2 * kept[i].chars().count() as f64) + 20.0
    };
    let mut boxes = vec![(0.0f64, 0.0f64); dtypes.len()]; // top-left corner of each dtype's box
    let mut svg_rows = String::new();
    let mut row_index = 0.0;
    let mut right_edge: f64 = 0.0;
    for (category, label, fill) in CATEGORY_ROWS {
        let mut row: Vec<usize> = (0..dtypes.len())
            .filter(|&i| dtypes[i].category() == category)
            .collect();
        if row.is_empty() {
            continue;
        }
        row.sort_by_key(|&i| (depth[i], dtypes[i].bits(), dtypes[i].index()));
        let y = TOP + row_index * ROW;
        svg_rows += &format!(
            "<text class=\"row\" x=\"10\" y=\"{:.1}\">{label}</text>\n",
            y + HEIGHT * 0.6
        );
        let mut x_free = LEFT;
        for i in row {
            let x = (LEFT + depth[i] as f64 * COLUMN).max(x_free);
            boxes[i] = (x, y);
            x_free = x + width(dtypes[i]) + GAP;
            svg_rows += &format!(
                "<rect x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{HEIGHT}\" rx=\"5\" \
                 fill=\"{fill}\" stroke=\"black\"/>\n<text class=\"dtype\" x=\"{:.1}\" \
                 y=\"{:.1}\">{}</text>\n<text class=\"weak\" x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
                width(dtypes[i]),
                x + width(dtypes[i]) / 2.0,
                y + 17.0,
                dtypes[i],
                x + width(dtypes[i]) / 2.0,
                y + 33.0,
                kept[i],
            );
        }
        right_edge = right_edge.max(x_free);
        row_index += 1.0;
    }
    let mut svg_edges = String::new();
    for &(a, b) in &edges {
        let ((ax, ay), (bx, by)) = (boxes[at(a)], boxes[at(b)]);
        let (wa, wb) = (width(a), width(b));
        let path = if (ay - by).abs() < 1.0 && bx <= ax + wa + GAP + 1.0 {
            // Neighbours in a row: right side to left side.
            let (x0, y0, x1, y1) = (ax + wa, ay + HEIGHT / 2.0, bx, by + HEIGHT / 2.0);
            format!("M{x0:.1},{y0:.1} L{x1:.1},{y1:.1}")
        } else if (ay - by).abs() < 1.0 {
            // Same row with boxes between: an arc over them, top to top.
            let (x0, x1, y) = (ax + wa / 2.0, bx + wb / 2.0, ay);
            let lift = y - 34.0;
            format!("M{x0:.1},{y:.1} C{x0:.1},{lift:.1} {x1:.1},{lift:.1} {x1:.1},{y:.1}")
        } else {
            // Down to a later row: bottom to top, as a gentle curve.
            let (x0, y0, x1, y1) = (ax + wa / 2.0, ay + HEIGHT, bx + wb / 2.0, by);
            let mid = (y0 + y1) / 2.0;
            format!("M{x0:.1},{y0:.1} C{x0:.1},{mid:.1} {x1:.1},{mid:.1} {x1:.1},{y1:.1}")
        };
        svg_edges += &format!("<path d=\"{path}\"/>\n");
    }
    let (w, h) = (right_edge + 20.0, TOP + row_index * ROW);
    writeln!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w:.0}\" height=\"{h:.0}\" \
         viewBox=\"0 0 {w:.0} {h:.0}\" font-family=\"monospace\" font-size=\"13\">"
    )?;
    writeln!(
        out,
        "<defs><marker id=\"arrow\" markerWidth=\"8\" markerHeight=\"6\" refX=\"8\" refY=\"3\" \
         orient=\"auto\"><polygon points=\"0 0, 8 3, 0 6\"/></marker></defs>"
    )?;
    writeln!(
        out,
        "<style>path {{ fill: none; stroke: #555; marker-end: url(#arrow); }} \
         .dtype {{ text-anchor: middle; }} .weak {{ text-anchor: middle; font-size: 10px; \
         fill: #444; }} .row {{ font-weight: bold; }}</style>"
    )?;
    writeln!(
        out,
        "<text x=\"10\" y=\"25\">{} promotion: a \u{2192} b when promote_types(a, b) = b and \
         nothing lies between</text>",
        policy.name()
    )?;
    writeln!(
        out,
        "<text x=\"10\" y=\"45\" font-size=\"11\">under a name: the Python scalars (int, float, \
         complex) that leave the dtype as it is in result_type(tensor, scalar)</text>"
    )?;
    write!(out, "<g>\n{svg_edges}</g>\n<g>\n{svg_rows}</g>\n</svg>\n")?;
    Ok(())
}

/// Which Python scalar kinds leave a tensor of `dtype` unchanged under the policy
/// (`result_type(tensor, scalar) == dtype`): where weak scalars sit in its order.
fn kept_scalars(policy: &dyn Policy, dtype: DType) -> String {
    use dtcast_promote::{Operand, ScalarKind};
    let kinds = [
        (ScalarKind::Int, "int"),
        (ScalarKind::Float, "float"),
        (ScalarKind::Complex, "complex"),
    ];
    let kept: Vec<&str> = kinds
        .iter()
        .filter(|(kind, _)| {
            let ops = [Operand::Tensor(dtype), Operand::WrappedScalar(*kind)];
            policy.result_type(&ops) == Ok(dtype)
        })
        .map(|(_, name)| *name)
        .collect();
    if kept.is_empty() {
        "\u{2014}".to_owned()
    } else {
        kept.join(" ")
    }
}

/// The covering relation of the promotion order: `a -> b` when `promote_types(a, b) == b != a`
/// and no `c` has `a < c < b`. Computed from the policy itself, never written down.
pub(crate) fn hasse_edges(policy: &dyn Policy, dtypes: &[DType]) -> Vec<(DType, DType)> {
    let below = |a: DType, b: DType| a != b && policy.promote_types(a, b) == Ok(b);
    let mut edges = Vec::new();
    for &a in dtypes {
        for &b in dtypes {
            if below(a, b) && !dtypes.iter().any(|&c| below(a, c) && below(c, b)) {
                edges.push((a, b));
            }
        }
    }
    edges
}

/// The Hasse diagram in DOT: one row (`rank=same`) per category, edges upward.
fn dot(policy: &dyn Policy, dtypes: &[DType], out: &mut dyn Write) -> Result<(), CmdError> {
    writeln!(out, "digraph \"{} promotion\" {{", policy.name())?;
    writeln!(
        out,
        "  rankdir=BT;\n  node [shape=box, fontname=\"monospace\"];"
    )?;
    for category in [
        Category::Bool,
        Category::UnsignedInt,
        Category::SignedInt,
        Category::Floating,
        Category::Complex,
    ] {
        let row: Vec<String> = dtypes
            .iter()
            .filter(|d| d.category() == category)
            .map(|d| format!("\"{d}\""))
            .collect();
        if !row.is_empty() {
            writeln!(out, "  {{ rank=same; {} }}", row.join("; "))?;
        }
    }
    for (a, b) in hasse_edges(policy, dtypes) {
        writeln!(out, "  \"{a}\" -> \"{b}\";")?;
    }
    writeln!(out, "}}")?;
    Ok(())
}

fn markdown(policy: &dyn Policy, dtypes: &[DType], out: &mut dyn Write) -> Result<(), CmdError> {
    write!(out, "| promote_types |")?;
    for dt in dtypes {
        write!(out, " {dt} |")?;
    }
    write!(out, "\n|---|")?;
    for _ in dtypes {
        write!(out, "---|")?;
    }
    writeln!(out)?;
    for &a in dtypes {
        write!(out, "| **{a}** |")?;
        for &b in dtypes {
            match policy.promote_types(a, b) {
                Ok(dt) => write!(out, " {dt} |")?,
                Err(_) => write!(out, " error |")?,
            }
        }
        writeln!(out)?;
    }
    let note = match policy.name() {
        "torch" => {
            "torch refuses the pair (float8 with another type; uint1/2/4 and uint16/32/64 with a \
             non-floating type; int1/2/4 and float4_e2m1fn_x2, which its table lacks, with another type)"
        }
        "NumPy" => "NumPy has no common DType",
        "Array API" => {
            "the Array API promotes only within a kind (bool; the integers, but uint64 with a \
             signed one; the real and complex floating types)"
        }
        _ => {
            "the lattice has no type above both (the 8-, 6- and 4-bit floats and the 1-, 2- and \
             4-bit integers with anything but themselves and bool)"
        }
    };
    writeln!(out, "\n`error`: {note}.")?;
    Ok(())
}
