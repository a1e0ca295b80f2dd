# Makes the image-input fixtures for tests/unit/vision: small test images in every supported
# format (and colour mode) and the pixel values the Hugging Face image processors compute for
# them. Run from the repo root: python3 tests/reference/make_vision_fixture.py
#   fixtures/vision/images/*: JPEG (RGB, grey), PNG (RGBA, palette, RGB), WebP (lossy,
#     lossless with alpha); deterministic synthetic pictures, a few KB each.
#   fixtures/vision/decoded.bin: Pillow's RGB of each image after transformers' convert_to_rgb
#     (alpha composited onto white), uint8 [h, w, 3] concatenated.
#   fixtures/vision/pixels.bin: float32 pixel_values [3, H, W] of each image through
#     SiglipImageProcessor (PIL backend, 32x32 bicubic, mean/std 0.5) and CLIPImageProcessor
#     (PIL backend, shortest edge 20, centre crop 18x18, bicubic, CLIP mean/std), concatenated.
#   fixtures/vision/index.json: names, sizes and offsets into the two .bin files.
import json
import os

import numpy as np
from PIL import Image
from transformers.models.clip.image_processing_pil_clip import CLIPImageProcessorPil
from transformers.models.siglip.image_processing_pil_siglip import SiglipImageProcessorPil

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "fixtures", "vision")


def picture(w, h, seed):
    # Smooth colour fields plus a little noise and a hard edge: compresses small, exercises
    # the resize filter's overshoot (the bicubic's negative lobes) and clipping.
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    r = 128 + 100 * np.sin(x / (w / 3.0) + seed)
    g = 128 + 100 * np.cos(y / (h / 2.5) + seed)
    b = np.where((x - w / 2) ** 2 + (y - h / 2) ** 2 < (min(w, h) / 3) ** 2, 235.0, 20.0)
    img = np.stack([r, g, b], -1) + rng.normal(0, 6, (h, w, 3))
    return np.clip(img, 0, 255).astype(np.uint8)


def make_images():
    d = os.path.join(OUT, "images")
    os.makedirs(d, exist_ok=True)
    files = []
    Image.fromarray(picture(48, 32, 1)).save(os.path.join(d, "rgb.jpg"), quality=90)
    files.append("rgb.jpg")
    Image.fromarray(picture(20, 30, 2)[:, :, 1]).save(os.path.join(d, "grey.jpg"), quality=85)
    files.append("grey.jpg")
    rgba = np.concatenate([picture(30, 18, 3), np.tile(np.linspace(0, 255, 30).astype(np.uint8), (18, 1))[..., None]], -1)
    Image.fromarray(rgba, "RGBA").save(os.path.join(d, "rgba.png"))
    files.append("rgba.png")
    Image.fromarray(picture(17, 17, 4)).quantize(16).save(os.path.join(d, "palette.png"))
    files.append("palette.png")
    # Large enough that the 32x32 resize shrinks by more than 2 (the filter widens).
    Image.fromarray(picture(75, 50, 5)).save(os.path.join(d, "big.png"))
    files.append("big.png")
    Image.fromarray(picture(40, 26, 6)).save(os.path.join(d, "lossy.webp"), quality=80)
    files.append("lossy.webp")
    rgba = np.concatenate([picture(14, 22, 7), np.full((22, 14, 1), 160, np.uint8)], -1)
    Image.fromarray(rgba, "RGBA").save(os.path.join(d, "alpha.webp"), lossless=True)
    files.append("alpha.webp")
    return files


def main():
    files = make_images()
    siglip = SiglipImageProcessorPil(size={"height": 32, "width": 32})
    clip = CLIPImageProcessorPil(size={"shortest_edge": 20}, crop_size={"height": 18, "width": 18})
    index = {"processors": {"siglip": siglip.to_dict(), "clip": clip.to_dict()}, "images": []}
    decoded, pixels = bytearray(), bytearray()
    for name in files:
        img = Image.open(os.path.join(OUT, "images", name))
        rgb = np.asarray(siglip.convert_to_rgb(img)) if img.mode != "RGB" else np.asarray(img)
        if rgb.ndim == 3 and rgb.shape[0] == 3 and rgb.shape[-1] != 3:
            rgb = np.moveaxis(rgb, 0, -1)
        entry = {"name": name, "mode": img.mode, "width": img.width, "height": img.height,
                 "decoded_offset": len(decoded)}
        decoded += np.ascontiguousarray(rgb, np.uint8).tobytes()
        for key, proc in (("siglip", siglip), ("clip", clip)):
            pv = proc(images=Image.open(os.path.join(OUT, "images", name)), return_tensors="np")["pixel_values"][0]
            entry[key] = {"offset": len(pixels), "shape": list(pv.shape)}
            pixels += pv.astype("<f4").tobytes()
        index["images"].append(entry)
    with open(os.path.join(OUT, "decoded.bin"), "wb") as f:
        f.write(decoded)
    with open(os.path.join(OUT, "pixels.bin"), "wb") as f:
        f.write(pixels)
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(index, f, indent=1, default=str)
    print(f"{len(files)} images, decoded {len(decoded)} B, pixels {len(pixels)} B")


if __name__ == "__main__":
    main()
