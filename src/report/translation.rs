//! The address translations (NAT) found between captures, for people: which host saw
//! which other host's endpoint under which address, on how many connections. The
//! numbers are [`crate::nat`]'s.

use super::{write_columns, Align};
use crate::nat::Translations;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr};

/// The table, or nothing where no translation was found.
pub fn write_translations(translations: &Translations, out: &mut dyn Write) -> io::Result<()> {
    for (host, connections) in &translations.passed {
        writeln!(
            out,
            "{host} saw {connections} connection{} between other captured hosts pass: their messages come from those hosts' captures",
            if *connections == 1 { "" } else { "s" }
        )?;
    }
    if translations.rows.is_empty() {
        return Ok(());
    }
    writeln!(
        out,
        "address translation (NAT): {} connections joined across it, from the TCP segments both ends saw; where a host saw another's endpoint under another address",
        translations.connections
    )?;
    let endpoint = |address: IpAddr, port: Option<u16>| match port {
        Some(port) => SocketAddr::new(address, port).to_string(),
        None => match address {
            IpAddr::V4(_) => format!("{address}:*"),
            IpAddr::V6(_) => format!("[{address}]:*"),
        },
    };
    let rows: Vec<[String; 4]> = translations
        .rows
        .iter()
        .map(|row| {
            [
                row.host.clone(),
                endpoint(row.seen, row.seen_port),
                row.connections.to_string(),
                format!(
                    "{} ({})",
                    endpoint(row.meant, row.meant_port),
                    row.meant_host
                ),
            ]
        })
        .collect();
    write_columns(
        out,
        "  ",
        (
            ["host", "sees", "connections", "which is"],
            [Align::Left, Align::Left, Align::Right, Align::Left],
        ),
        &rows,
    )?;
    for service in &translations.services {
        writeln!(
            out,
            "  {} stood for {}: replicas of one service, the node {} (--node-by pod keeps them apart)",
            service.address,
            service.replicas.join(", "),
            service.name
        )?;
    }
    if translations.conflicts > 0 {
        writeln!(
            out,
            "  {} views of a connection matched two connections (a port used again): the one with more segments kept",
            translations.conflicts
        )?;
    }
    Ok(())
}
