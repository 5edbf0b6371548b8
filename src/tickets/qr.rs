//! A ticket's QR code: the module matrix, shared by the PDF, and as a PNG for
//! the mail.

use qrcode::{Color, QrCode};

use super::DocumentError;

/// Light modules around the code on every side: the four the QR standard
/// asks for, so a scanner finds the finder patterns on any background.
const QUIET_ZONE: usize = 4;

/// PNG pixels per module: whole pixels keep the edges sharp when a mail
/// client shows the image at its own size, and 8 makes a ~260 px image for
/// a 32-character code, big enough for a phone held up to a scanner.
const SCALE: usize = 8;

/// A QR code as 8-bit gray samples, one per module, quiet zone included,
/// row by row from the top: 0 is dark, 255 light.
pub(super) struct Modules {
    /// Modules per side, quiet zone included.
    pub(super) width: usize,
    pub(super) samples: Vec<u8>,
}

/// The QR code whose content is exactly the code's bytes (what the door's
/// scanner compares), at qrcode's default error correction (M).
pub(super) fn modules(code: &str) -> Result<Modules, DocumentError> {
    let qr = QrCode::new(code.as_bytes()).map_err(|e| DocumentError::Qr(e.to_string()))?;
    let inner = qr.width();
    let width = inner + 2 * QUIET_ZONE;
    let mut samples = vec![u8::MAX; width * width];
    for (i, color) in qr.to_colors().into_iter().enumerate() {
        if color == Color::Dark {
            let (row, column) = (i / inner + QUIET_ZONE, i % inner + QUIET_ZONE);
            samples[row * width + column] = 0;
        }
    }
    Ok(Modules { width, samples })
}

/// The ticket's QR code as an 8-bit grayscale PNG, [`SCALE`] pixels per
/// module with a four-module quiet zone. PNG because mail clients show no
/// SVG inline.
pub fn png(code: &str) -> Result<Vec<u8>, DocumentError> {
    let modules = modules(code)?;
    let side = modules.width * SCALE;
    let mut pixels = Vec::with_capacity(side * side);
    for row in modules.samples.chunks(modules.width) {
        let line: Vec<u8> = row
            .iter()
            .flat_map(|&sample| std::iter::repeat_n(sample, SCALE))
            .collect();
        for _ in 0..SCALE {
            pixels.extend_from_slice(&line);
        }
    }
    let side = u32::try_from(side).map_err(|e| DocumentError::Png(e.to_string()))?;

    let png_error = |e: ::png::EncodingError| DocumentError::Png(e.to_string());
    let mut out = Vec::new();
    let mut encoder = ::png::Encoder::new(&mut out, side, side);
    encoder.set_color(::png::ColorType::Grayscale);
    encoder.set_depth(::png::BitDepth::Eight);
    let mut writer = encoder.write_header().map_err(png_error)?;
    writer.write_image_data(&pixels).map_err(png_error)?;
    writer.finish().map_err(png_error)?;
    Ok(out)
}

/// The contents of the QR codes found in an 8-bit grayscale image, read the
/// way a scanner would: for the tests here and in the PDF's.
#[cfg(test)]
pub(super) fn read_back(width: usize, height: usize, gray: &[u8]) -> Vec<String> {
    let mut image =
        rqrr::PreparedImage::prepare_from_greyscale(width, height, |x, y| gray[y * width + x]);
    image
        .detect_grids()
        .into_iter()
        .map(|grid| grid.decode().expect("a readable QR code").1)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODE: &str = "K7Q2M4X9PL3VWT8ZR6YDN5HC2JBF4GSA";

    fn decode_png(bytes: &[u8]) -> (png::OutputInfo, Vec<u8>) {
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        buf.truncate(info.buffer_size());
        (info, buf)
    }

    #[test]
    fn the_png_reads_back_as_exactly_the_code() {
        let bytes = png(CODE).unwrap();
        let (info, gray) = decode_png(&bytes);
        assert_eq!(info.color_type, png::ColorType::Grayscale);
        assert_eq!(info.bit_depth, png::BitDepth::Eight);
        let (width, height) = (info.width as usize, info.height as usize);
        assert_eq!(width, height);
        assert_eq!(read_back(width, height, &gray), vec![CODE.to_owned()]);
    }

    #[test]
    fn the_png_has_a_quiet_zone_and_whole_pixels_per_module() {
        let bytes = png(CODE).unwrap();
        let (info, gray) = decode_png(&bytes);
        let width = info.width as usize;
        assert_eq!(width % SCALE, 0);
        let margin = QUIET_ZONE * SCALE;
        let light = |x: usize, y: usize| gray[y * width + x] == u8::MAX;
        for i in 0..width {
            for d in 0..margin {
                assert!(
                    light(i, d) && light(i, width - 1 - d),
                    "row edge at {i},{d}"
                );
                assert!(
                    light(d, i) && light(width - 1 - d, i),
                    "column edge at {i},{d}"
                );
            }
        }
        // The finder pattern's corner starts right inside the quiet zone.
        assert_eq!(gray[margin * width + margin], 0);
        assert!(gray.iter().all(|&s| s == 0 || s == u8::MAX));
    }

    #[test]
    fn a_different_code_reads_back_differently() {
        let other = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789";
        let (info, gray) = decode_png(&png(other).unwrap());
        let side = info.width as usize;
        assert_eq!(read_back(side, side, &gray), vec![other.to_owned()]);
    }

    #[test]
    fn a_code_too_long_for_any_qr_code_is_an_error() {
        let long = "A".repeat(8000);
        assert!(matches!(png(&long), Err(DocumentError::Qr(_))));
    }
}
