// Inputs at least 44 px tall, the mobile touch target (Mantine's default input is 36 px).
export const TOUCH_INPUT = { input: { minHeight: 44 } } as const;
