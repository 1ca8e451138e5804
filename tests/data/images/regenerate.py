#!/usr/bin/python3
"""Regenerates the test images in this folder from Debian packages.

Needs python3-pil, gnome-backgrounds, openclipart-png and python-matplotlib-data
(apt-get install -y ...). The outputs are committed: tests never run this.
"""
import os

from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
WOOD = "/usr/share/backgrounds/gnome/wood-l.webp"                    # gnome-backgrounds
HOPPER = "/usr/share/matplotlib/mpl-data/sample_data/grace_hopper.jpg"  # python-matplotlib-data
CLIPART = "/usr/share/openclipart/png/animals/"                        # openclipart-png


def out(name):
    return os.path.join(HERE, name)


wood = Image.open(WOOD).convert("RGB").crop((0, 800, 4096, 3360))  # 16:10 strip
wood.resize((320, 200), Image.LANCZOS).save(out("wood_320x200.jpg"), quality=90)
wood.resize((150, 94), Image.LANCZOS).save(out("wood_progressive_150x94.jpg"), quality=85,
                                           progressive=True)

hopper = Image.open(HOPPER).convert("RGB")
hopper.resize((171, 200), Image.LANCZOS).save(out("hopper_171x200.jpg"), quality=85)
gray = hopper.convert("L")
gray.resize((37, 23), Image.LANCZOS).save(out("hopper_gray_37x23.jpg"), quality=90)
gray.resize((37, 23), Image.LANCZOS).save(out("hopper_gray_37x23.png"))
hopper.resize((64, 75), Image.LANCZOS).quantize(64).save(out("hopper_palette_64x75.png"))

cats = Image.open(CLIPART + "cani_e_gatti_cat_and_do_01.png")  # RGBA
cats.resize((206, 50), Image.LANCZOS).save(out("cats_dogs_rgba_206x50.png"))
armadillo = Image.open(CLIPART + "armadillo_architetto_fra_01.png")  # LA: gray + alpha
armadillo.resize((105, 52), Image.LANCZOS).save(out("armadillo_gray_alpha_105x52.png"))
