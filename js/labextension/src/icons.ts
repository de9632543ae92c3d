// Icons of mlc_lab's Launcher tiles and palette commands (LabIcon: they follow the theme's colours).

import { LabIcon } from "@jupyterlab/ui-components";

// A loop nest: three nested brackets around a small tile (the explorer).
const EXPLORE_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">
  <g class="jp-icon3" fill="none" stroke="#616161" stroke-width="1.6" stroke-linecap="round">
    <path d="M4 3v18M4 3h3M4 21h3"/><path d="M8 6v12M8 6h3M8 18h3"/><path d="M12 9v6M12 9h3M12 15h3"/>
  </g>
  <rect class="jp-icon-brand0" fill="#F37626" x="16" y="10" width="5" height="4" rx="0.8"/>
</svg>`;

// Latency falling over trials (the tuning dashboard).
const TUNING_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 24 24">
  <path class="jp-icon3" fill="none" stroke="#616161" stroke-width="1.6" stroke-linecap="round" d="M3 3v18h18"/>
  <path class="jp-icon-brand0" fill="none" stroke="#F37626" stroke-width="1.8" stroke-linejoin="round"
        d="M5 6l3 5 3-2 3 6 3-1 3 3"/>
</svg>`;

export const exploreIcon = new LabIcon({ name: "mlc-lab:explore", svgstr: EXPLORE_SVG });
export const tuningIcon = new LabIcon({ name: "mlc-lab:tuning-run", svgstr: TUNING_SVG });
