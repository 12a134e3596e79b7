"""The MiniMax drafter "wide" megakernel (FlyDSL, AMD CDNA3/CDNA4, TP4): stages and offline compile."""
